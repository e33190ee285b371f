package io.kvrouter.mockengine;

import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.DoubleAdder;

/**
 * The mock engine's {@code /metrics}, under vLLM's own metric names and label ({@code model_name},
 * plus {@code engine="0"}), in Prometheus' text format, so that load-aware routers that scrape vLLM
 * read it unchanged.
 *
 * <pre>
 * Implementation notes
 *
 * Gauges (running, waiting, KV usage) are written by the scheduler thread after each step and read
 * by the scraping handler; counters and histograms are atomics that any thread adds to. A scrape
 * is not a snapshot across metrics (neither is vLLM's). Histogram buckets are vLLM's.
 * </pre>
 */
final class EngineMetrics {
  /** vLLM's buckets for time_to_first_token_seconds. */
  private static final double[] TTFT_BUCKETS = {
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0
  };

  /** vLLM's request latency buckets (e2e, queue, prefill, decode). */
  private static final double[] LATENCY_BUCKETS = {
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0
  };

  /** vLLM's inter-token latency buckets. */
  private static final double[] ITL_BUCKETS = {
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0
  };

  private final String labels;
  private final int numGpuBlocks;
  private final int blockSize;

  volatile int running;
  volatile int waiting;
  volatile double kvUsage;

  final AtomicLong prefixQueries = new AtomicLong();
  final AtomicLong prefixHits = new AtomicLong();
  final AtomicLong promptTokens = new AtomicLong();
  final AtomicLong generationTokens = new AtomicLong();
  final AtomicLong successStop = new AtomicLong();
  final AtomicLong successLength = new AtomicLong();
  final AtomicLong successAbort = new AtomicLong();
  final AtomicLong preemptions = new AtomicLong();
  final AtomicLong pulledBlocks = new AtomicLong();
  final AtomicLong hostLoadedBlocks = new AtomicLong();
  final Histogram ttft = new Histogram(TTFT_BUCKETS);
  final Histogram e2e = new Histogram(LATENCY_BUCKETS);
  final Histogram queue = new Histogram(LATENCY_BUCKETS);
  final Histogram prefill = new Histogram(LATENCY_BUCKETS);
  final Histogram decode = new Histogram(LATENCY_BUCKETS);
  final Histogram itl = new Histogram(ITL_BUCKETS);

  EngineMetrics(String modelName, int numGpuBlocks, int blockSize) {
    this.labels = "model_name=\"" + modelName.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    this.numGpuBlocks = numGpuBlocks;
    this.blockSize = blockSize;
  }

  /** A histogram with fixed upper bounds, in seconds. */
  static final class Histogram {
    private final double[] bounds;
    private final AtomicLongArray counts;
    private final DoubleAdder sum = new DoubleAdder();
    private final AtomicLong count = new AtomicLong();

    Histogram(double[] bounds) {
      this.bounds = bounds;
      this.counts = new AtomicLongArray(bounds.length);
    }

    void observe(double seconds) {
      for (int i = 0; i < bounds.length; i++) {
        if (seconds <= bounds[i]) {
          counts.incrementAndGet(i);
          break;
        }
      }
      sum.add(seconds);
      count.incrementAndGet();
    }

    long count() {
      return count.get();
    }

    void write(StringBuilder sb, String name, String labels) {
      long cumulative = 0;
      for (int i = 0; i < bounds.length; i++) {
        cumulative += counts.get(i);
        sb.append(name)
            .append("_bucket{")
            .append(labels)
            .append(",le=\"")
            .append(bounds[i])
            .append("\"} ")
            .append((double) cumulative)
            .append('\n');
      }
      long n = count.get();
      sb.append(name).append("_bucket{").append(labels).append(",le=\"+Inf\"} ");
      sb.append((double) n).append('\n');
      sb.append(name).append("_count{").append(labels).append("} ").append((double) n);
      sb.append('\n');
      sb.append(name).append("_sum{").append(labels).append("} ").append(sum.sum()).append('\n');
    }
  }

  /** The Prometheus text exposition. */
  String scrape() {
    StringBuilder sb = new StringBuilder(8192);
    String l = labels + ",engine=\"0\"";
    gauge(
        sb,
        "vllm:num_requests_running",
        "Number of requests in model execution batches.",
        l,
        running);
    gauge(
        sb, "vllm:num_requests_waiting", "Number of requests waiting to be processed.", l, waiting);
    gauge(sb, "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", l, kvUsage);
    gauge(sb, "vllm:num_gpu_blocks", "Number of KV cache blocks (mock engine).", l, numGpuBlocks);
    // vLLM's info metric of its cache configuration: the values are labels, the sample 1
    gauge(
        sb,
        "vllm:cache_config_info",
        "Information of the LLMEngine CacheConfig",
        "block_size=\"" + blockSize + "\",engine=\"0\",num_gpu_blocks=\"" + numGpuBlocks + "\"",
        1);
    counter(
        sb,
        "vllm:prefix_cache_queries",
        "Prefix cache queries, in terms of number of queried tokens.",
        l,
        prefixQueries.get());
    counter(
        sb,
        "vllm:prefix_cache_hits",
        "Prefix cache hits, in terms of number of cached tokens.",
        l,
        prefixHits.get());
    counter(
        sb,
        "vllm:num_preemptions",
        "Cumulative number of preemption from the engine.",
        l,
        preemptions.get());
    counter(sb, "vllm:prompt_tokens", "Number of prefill tokens processed.", l, promptTokens.get());
    counter(
        sb,
        "mock:kv_pulled_blocks",
        "KV blocks pulled from prefill engines (mock engine, --kv-role consumer).",
        l,
        pulledBlocks.get());
    counter(
        sb,
        "mock:kv_host_loaded_blocks",
        "KV blocks loaded from the host tier instead of recomputed (mock engine, --host-blocks).",
        l,
        hostLoadedBlocks.get());
    counter(
        sb,
        "vllm:generation_tokens",
        "Number of generation tokens processed.",
        l,
        generationTokens.get());
    sb.append("# HELP vllm:request_success_total Count of successfully processed requests.\n");
    sb.append("# TYPE vllm:request_success_total counter\n");
    success(sb, l, "stop", successStop.get());
    success(sb, l, "length", successLength.get());
    success(sb, l, "abort", successAbort.get());
    histogram(
        sb,
        "vllm:time_to_first_token_seconds",
        "Histogram of time to first token in seconds.",
        l,
        ttft);
    histogram(
        sb,
        "vllm:inter_token_latency_seconds",
        "Histogram of inter-token latency in seconds.",
        l,
        itl);
    histogram(
        sb,
        "vllm:e2e_request_latency_seconds",
        "Histogram of e2e request latency in seconds.",
        l,
        e2e);
    histogram(
        sb,
        "vllm:request_queue_time_seconds",
        "Histogram of time spent in WAITING phase for request.",
        l,
        queue);
    histogram(
        sb,
        "vllm:request_prefill_time_seconds",
        "Histogram of time spent in PREFILL phase for request.",
        l,
        prefill);
    histogram(
        sb,
        "vllm:request_decode_time_seconds",
        "Histogram of time spent in DECODE phase for request.",
        l,
        decode);
    return sb.toString();
  }

  private static void gauge(StringBuilder sb, String name, String help, String l, double v) {
    sb.append("# HELP ").append(name).append(' ').append(help).append('\n');
    sb.append("# TYPE ").append(name).append(" gauge\n");
    sb.append(name).append('{').append(l).append("} ").append(v).append('\n');
  }

  private static void counter(StringBuilder sb, String name, String help, String l, long v) {
    sb.append("# HELP ").append(name).append("_total ").append(help).append('\n');
    sb.append("# TYPE ").append(name).append("_total counter\n");
    sb.append(name).append("_total{").append(l).append("} ").append((double) v).append('\n');
  }

  private static void success(StringBuilder sb, String l, String reason, long v) {
    sb.append("vllm:request_success_total{").append(l).append(",finished_reason=\"");
    sb.append(reason).append("\"} ").append((double) v).append('\n');
  }

  private static void histogram(StringBuilder sb, String name, String help, String l, Histogram h) {
    sb.append("# HELP ").append(name).append(' ').append(help).append('\n');
    sb.append("# TYPE ").append(name).append(" histogram\n");
    h.write(sb, name, l);
  }
}
