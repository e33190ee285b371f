package io.kvrouter.transport.zmq;

import io.kvrouter.hash.BlockHasher;
import io.kvrouter.transport.SingleWriterCounters;
import io.kvrouter.transport.kvevents.EngineEventConverter;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;
import java.util.logging.Level;
import java.util.logging.Logger;
import org.jspecify.annotations.Nullable;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;
import org.zeromq.ZMQException;
import org.zeromq.ZMonitor;

/**
 * Ingests the KV events of vLLM or SGLang engines over ZMQ: one SUB socket, either connected to one
 * engine's PUB endpoint or bound for engines to connect to, read by one thread that decodes each
 * batch, converts it into router events and hands them to an {@link IngestSink} (usually the
 * router's index).
 *
 * <pre>{@code
 * ZmqEventSubscriber sub =
 *     ZmqEventSubscriber.connect(
 *             "tcp://10.0.0.5:5557",
 *             EngineSpec.of(workerId, 16).withTopic("kv-events").withReplay("tcp://10.0.0.5:5558"))
 *         .routerHasher(BlockHasher.of(16))
 *         .sink(IngestSink.deviceIndex(index))
 *         .start();
 * }</pre>
 *
 * <p>Messages are {@code [topic, 8-byte big-endian sequence, msgpack payload]}; other shapes are
 * counted and skipped, malformed payloads are counted and skipped, and the thread keeps going.
 * Sequence numbers are tracked per engine: a gap is filled from the engine's replay endpoint when
 * it has one (else counted lost), a sequence that goes back (or a replay that shows another
 * history) means the engine restarted and its blocks are cleared, a new subscriber replays from 0
 * and every completed connection triggers a catch-up. Lost connections are re-made by ZMQ with
 * capped exponential backoff. See {@code docs/ingestion.md} and {@code docs/concurrency.md}.
 */
public final class ZmqEventSubscriber implements AutoCloseable {
  /*
   * Implementation notes
   *
   * Threads: start() builds the ZContext and the SUB socket on the caller's thread (so that a
   * bad endpoint or a port in use fails there), then hands them to one platform thread that
   * owns every socket from then on (Thread.start is the memory barrier ZMQ asks for when a
   * socket changes threads): the SUB and each engine's replay DEALER. That thread runs the loop,
   * calls the converters and the sink, and finally closes the context. Other threads only read
   * the counters, each Source's lastApplied, and the running flag's value they wrote.
   *
   * Connection events come from jeromq's event hook, which runs on ZMQ's I/O thread and only
   * bumps two atomic counters (handshakes, disconnects). No monitor socket: jeromq 0.6 writes
   * monitor events with a blocking send from the I/O thread. HANDSHAKE_IVL is short (2 s by
   * default) because jeromq 0.6 sometimes leaves a fresh outgoing connection mute until that
   * timer fires (zeromq/jeromq#1022); see docs/ingestion.md.
   *
   * Loop: poll the SUB for up to POLL_MS; take in new connection events (a handshake counts a
   * connection, a reconnection if a disconnect came before it, and schedules a catch-up of every
   * engine with a replay endpoint now and RESYNC_DELAY later); run due catch-ups; drain up to
   * DRAIN_LIMIT messages from the SUB.
   * When a turn drained nothing, engines with a replay endpoint that have been silent for the
   * tail-probe delay since their last live message get a catch-up (Source.probeTail, repeated
   * with a doubling pause while the silence lasts): what it replays is the lost tail of a burst.
   * A catch-up blocks the loop while it lasts (live messages wait in the SUB's queue, up to its
   * high-water mark). close() clears the running flag; every wait in the loop and in a replay
   * is sliced to <= 50 ms, so the thread ends within about that, then close() joins it.
   *
   * Sources are keyed by topic. In connect mode there is one; in bind mode one per registered
   * engine, and each engine must publish with its own topic (two publishers on one topic would
   * interleave two sequences).
   */

  private static final Logger LOG = Logger.getLogger(ZmqEventSubscriber.class.getName());
  private static final int POLL_MS = 50;
  private static final int DRAIN_LIMIT = 4096;
  private static final long RESYNC_DELAY_NANOS = 1_000_000_000L;
  private static final int MAX_FRAMES = 8;

  /** The default of {@link Builder#tailProbeAfter}. */
  public static final Duration DEFAULT_TAIL_PROBE_AFTER = Duration.ofSeconds(1);

  /** How the subscriber's SUB socket meets the engines. */
  private enum Mode {
    CONNECT,
    BIND
  }

  /** Configures and starts a {@link ZmqEventSubscriber}. */
  public static final class Builder {
    private final Mode mode;
    private final String endpoint;
    private final List<EngineSpec> engines;
    private @Nullable BlockHasher routerHasher; // null: not given yet (required)
    private @Nullable IngestSink sink; // null: not given yet (required)
    private Duration reconnectInitial = Duration.ofMillis(100);
    private Duration reconnectMax = Duration.ofSeconds(5);
    private Duration replayTimeout = Duration.ofSeconds(2);
    private Duration handshakeTimeout = Duration.ofSeconds(2);
    private int receiveHighWaterMark = 100_000;
    private Duration tailProbeAfter = DEFAULT_TAIL_PROBE_AFTER;

    private Builder(Mode mode, String endpoint, List<EngineSpec> engines) {
      this.mode = mode;
      this.endpoint = Objects.requireNonNull(endpoint, "endpoint");
      this.engines = List.copyOf(engines);
    }

    /** The router's hasher: its block size, without salt. Required. */
    public Builder routerHasher(BlockHasher routerHasher) {
      this.routerHasher = Objects.requireNonNull(routerHasher, "routerHasher");
      return this;
    }

    /** Where events go. Required. */
    public Builder sink(IngestSink sink) {
      this.sink = Objects.requireNonNull(sink, "sink");
      return this;
    }

    /**
     * Reconnection backoff of the SUB and replay sockets: the first retry after {@code initial},
     * each next one after twice the previous wait, never more than {@code max} (ZMQ's {@code
     * RECONNECT_IVL} and {@code RECONNECT_IVL_MAX}). Defaults 100 ms and 5 s.
     */
    public Builder reconnectBackoff(Duration initial, Duration max) {
      if (initial.isNegative() || initial.isZero() || max.compareTo(initial) < 0) {
        throw new IllegalArgumentException(
            "need 0 < initial <= max, got initial " + initial + " and max " + max);
      }
      this.reconnectInitial = initial;
      this.reconnectMax = max;
      return this;
    }

    /** How long to wait for each answer of a replay before giving up on it. Default 2 s. */
    public Builder replayTimeout(Duration timeout) {
      if (timeout.isNegative() || timeout.isZero()) {
        throw new IllegalArgumentException("replay timeout must be > 0, got " + timeout);
      }
      this.replayTimeout = timeout;
      return this;
    }

    /**
     * How long a new connection may take to complete its ZMTP handshake before it is dropped and
     * made again (ZMQ's {@code HANDSHAKE_IVL}, 30 s by default in ZMQ). Default 2 s: jeromq 0.6
     * sometimes leaves a fresh outgoing connection without a handshake until this timer fires
     * (zeromq/jeromq#1022), so it bounds how long such a connection stays mute.
     */
    public Builder handshakeTimeout(Duration timeout) {
      if (timeout.isNegative() || timeout.isZero()) {
        throw new IllegalArgumentException("handshake timeout must be > 0, got " + timeout);
      }
      this.handshakeTimeout = timeout;
      return this;
    }

    /** Messages the SUB socket queues before ZMQ drops; 0 is unlimited. Default 100,000. */
    public Builder receiveHighWaterMark(int messages) {
      if (messages < 0) {
        throw new IllegalArgumentException("high-water mark must be >= 0, got " + messages);
      }
      this.receiveHighWaterMark = messages;
      return this;
    }

    /**
     * How long an engine with a replay endpoint may be silent after publishing before its replay
     * buffer is asked for what follows the last batch applied: the tail of a burst that the live
     * socket dropped shows no gap until the engine publishes again, and nothing else announces it.
     * While the silence lasts it is asked again after twice the previous pause, up to a minute
     * apart. Zero: never. Default 1 s.
     */
    public Builder tailProbeAfter(Duration silence) {
      if (silence.isNegative()) {
        throw new IllegalArgumentException("tail probe delay must be >= 0, got " + silence);
      }
      this.tailProbeAfter = silence;
      return this;
    }

    /**
     * Opens the socket and starts the subscriber's thread.
     *
     * @throws IllegalArgumentException when an engine's block size is not a multiple of the
     *     router's, topics repeat in bind mode, or something required is missing
     * @throws ZMQException when the endpoint cannot be connected to or bound
     */
    public ZmqEventSubscriber start() {
      BlockHasher hasher = routerHasher;
      IngestSink s = sink;
      if (hasher == null) throw new IllegalArgumentException("routerHasher is required");
      if (s == null) throw new IllegalArgumentException("sink is required");
      return new ZmqEventSubscriber(this, hasher, s);
    }
  }

  /**
   * A subscriber connected to the PUB endpoint of one engine; an engine registered with topic
   * {@code ""} takes whatever topic it publishes with.
   */
  public static Builder connect(String endpoint, EngineSpec engine) {
    return new Builder(Mode.CONNECT, endpoint, List.of(Objects.requireNonNull(engine, "engine")));
  }

  /**
   * A subscriber bound to {@code endpoint} (e.g. {@code tcp://*:5557}) for engines whose PUB
   * sockets connect to it; each engine publishes with its own topic.
   */
  public static Builder bind(String endpoint, List<EngineSpec> engines) {
    if (engines.isEmpty()) {
      throw new IllegalArgumentException("bind mode needs at least one engine");
    }
    return new Builder(Mode.BIND, endpoint, engines);
  }

  private final SingleWriterCounters<Counters.C> counters = Counters.create();
  private final Map<String, Source> sources;

  /** In connect mode, the engine registered without a topic takes every topic; else null. */
  private final @Nullable Source anyTopic;

  private final ZContext ctx;
  private final ZMQ.Socket sub;
  private final AtomicLong handshakes = new AtomicLong();
  private final AtomicLong disconnects = new AtomicLong();
  private long handshakesSeen;
  private long disconnectsSeen;
  private final String boundEndpoint;
  private final Thread thread;
  private volatile boolean running = true;
  private long pendingDisconnects;
  private final long tailProbeNanos;

  private ZmqEventSubscriber(Builder b, BlockHasher routerHasher, IngestSink sink) {
    Set<String> topics = new HashSet<>();
    for (EngineSpec e : b.engines) {
      EngineEventConverter.checkBlockSizes(e.blockSize(), routerHasher.blockSize());
      if (!topics.add(e.topic())) {
        throw new IllegalArgumentException(
            "two engines publish with topic \""
                + e.topic()
                + "\"; in bind mode every engine needs its own topic");
      }
    }
    final int ivl = (int) b.reconnectInitial.toMillis();
    final int ivlMax = (int) b.reconnectMax.toMillis();
    final int handshakeMs = (int) b.handshakeTimeout.toMillis();
    Map<String, Source> byTopic = new LinkedHashMap<>();
    ctx = new ZContext(1);
    try {
      ctx.setLinger(0);
      sub = ctx.createSocket(SocketType.SUB);
      sub.setLinger(0);
      sub.setRcvHWM(b.receiveHighWaterMark);
      sub.setReconnectIVL(ivl);
      sub.setReconnectIVLMax(ivlMax);
      sub.setHandshakeIvl(handshakeMs);
      sub.setEventHook(
          ev -> {
            if (ev.getEvent() == ZMonitor.Event.HANDSHAKE_PROTOCOL) {
              handshakes.incrementAndGet();
            } else if (ev.getEvent() == ZMonitor.Event.DISCONNECTED) {
              disconnects.incrementAndGet();
            }
          },
          ZMQ.EVENT_HANDSHAKE_PROTOCOL | ZMQ.EVENT_DISCONNECTED);
      for (EngineSpec e : b.engines) {
        sub.subscribe(e.topic().getBytes(StandardCharsets.UTF_8));
        ReplayClient replay = null;
        String replayEndpoint = e.replayEndpoint();
        if (replayEndpoint != null) {
          replay = new ReplayClient(ctx, replayEndpoint, ivl, ivlMax, handshakeMs);
          replay.open(); // here, so that an endpoint ZMQ rejects fails start()
        }
        EngineEventConverter converter =
            new EngineEventConverter(
                e.workerId(), e.defaultDpRank(), e.blockSize(), routerHasher, e.clearScope());
        byTopic.put(
            e.topic(),
            new Source(
                e, converter, replay, counters, sink, b.replayTimeout.toMillis(), () -> running));
      }
      if (b.mode == Mode.BIND) {
        sub.bind(b.endpoint);
      } else {
        sub.connect(b.endpoint);
      }
      boundEndpoint = sub.getLastEndpoint();
    } catch (RuntimeException e) {
      ctx.close();
      throw e;
    }
    sources = Collections.unmodifiableMap(byTopic);
    anyTopic = b.mode == Mode.CONNECT ? sources.get("") : null;
    tailProbeNanos = b.tailProbeAfter.toNanos();
    thread = new Thread(this::run, "kvrouter-zmq-" + b.endpoint);
    thread.setDaemon(true);
    thread.start();
  }

  /** Counters since start, summed over the engines. */
  public IngestStats stats() {
    return Counters.snapshot(counters);
  }

  /**
   * The sequence number of the last batch dealt with (applied, rejected or given up) from the
   * engine publishing with {@code topic}; -1 before the first.
   *
   * @throws IllegalArgumentException when no registered engine uses that topic
   */
  public long lastSequence(String topic) {
    Source s = sources.get(topic);
    if (s == null) {
      throw new IllegalArgumentException("no engine publishes with topic \"" + topic + "\"");
    }
    return s.lastApplied();
  }

  /**
   * Nanoseconds since the last live message of the engine publishing with {@code topic}; -1 before
   * the first.
   *
   * @throws IllegalArgumentException when no registered engine uses that topic
   */
  public long nanosSinceLastMessage(String topic) {
    Source s = sources.get(topic);
    if (s == null) {
      throw new IllegalArgumentException("no engine publishes with topic \"" + topic + "\"");
    }
    long last = s.lastMessageNanos();
    return last == 0 ? -1 : Math.max(0, System.nanoTime() - last);
  }

  /**
   * The endpoint the SUB socket connected or bound to, with the port resolved (useful after binding
   * to {@code tcp://127.0.0.1:*}).
   */
  public String endpoint() {
    return boundEndpoint;
  }

  /** Stops the thread (within about 50 ms) and closes every socket. Idempotent. */
  @Override
  public void close() {
    running = false;
    if (Thread.currentThread() != thread) {
      try {
        thread.join(10_000);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }

  // ---------------------------------------------------------------- the subscriber's thread

  private void run() {
    try (ZMQ.Poller poller = ctx.createPoller(1)) {
      poller.register(sub, ZMQ.Poller.POLLIN);
      while (running) {
        poller.poll(POLL_MS);
        if (!running) break;
        connectionEvents();
        runDueCatchUps();
        if (drainSub() == 0) probeSilentTails();
      }
    } catch (RuntimeException | Error e) {
      if (running) {
        LOG.log(Level.SEVERE, "ZMQ subscriber " + boundEndpoint + " stopped on an error", e);
      }
    } finally {
      running = false;
      for (Source s : sources.values()) {
        s.close();
      }
      ctx.close();
    }
  }

  /** Takes in what the event hook counted since the last turn (disconnections first). */
  private void connectionEvents() {
    long d = disconnects.get();
    if (d != disconnectsSeen) {
      counters.add(Counters.C.DISCONNECTS, d - disconnectsSeen);
      pendingDisconnects += d - disconnectsSeen;
      disconnectsSeen = d;
    }
    long h = handshakes.get();
    if (h == handshakesSeen) {
      return;
    }
    long n = h - handshakesSeen;
    handshakesSeen = h;
    counters.add(Counters.C.CONNECTIONS, n);
    long again = Math.min(n, pendingDisconnects);
    pendingDisconnects -= again;
    counters.add(Counters.C.RECONNECTS, again);
    long later = System.nanoTime() + RESYNC_DELAY_NANOS;
    for (Source s : sources.values()) {
      if (s.hasReplay()) {
        s.resyncNow = true;
        s.resyncAt = later == 0 ? 1 : later;
      }
    }
  }

  private void runDueCatchUps() {
    long now = System.nanoTime();
    for (Source s : sources.values()) {
      boolean due = s.resyncNow || (s.resyncAt != 0 && now - s.resyncAt >= 0);
      if (s.resyncAt != 0 && now - s.resyncAt >= 0) {
        s.resyncAt = 0;
      }
      s.resyncNow = false;
      if (due && running) {
        s.catchUp();
      }
    }
  }

  /** With the live queue empty: probes the replay buffer of engines silent since a while. */
  private void probeSilentTails() {
    if (tailProbeNanos <= 0) return;
    long now = System.nanoTime();
    for (Source s : sources.values()) {
      if (running && s.tailProbeDue(now, tailProbeNanos)) s.probeTail();
    }
  }

  /** Takes in up to DRAIN_LIMIT live messages; returns how many. */
  private int drainSub() {
    List<byte[]> frames = new ArrayList<>(4);
    int n = 0;
    for (; n < DRAIN_LIMIT && running; n++) {
      byte[] first = sub.recv(ZMQ.DONTWAIT);
      if (first == null) {
        return n;
      }
      frames.clear();
      frames.add(first);
      while (sub.hasReceiveMore()) {
        byte[] f = sub.recv();
        if (frames.size() < MAX_FRAMES) frames.add(f);
      }
      onMessage(frames);
    }
    return n;
  }

  private void onMessage(List<byte[]> frames) {
    counters.inc(Counters.C.MESSAGES);
    if (frames.size() != 3) {
      bad("expected 3 frames [topic, sequence, payload], got " + frames.size());
      return;
    }
    byte[] seq = frames.get(1);
    if (seq.length != 8) {
      bad("the sequence frame has " + seq.length + " bytes, expected 8");
      return;
    }
    long s = ByteBuffer.wrap(seq).getLong();
    if (s < 0) {
      bad("negative sequence number " + s);
      return;
    }
    String topic = new String(frames.get(0), StandardCharsets.UTF_8);
    Source source = sources.get(topic);
    if (source == null) {
      source = anyTopic;
    }
    if (source == null) {
      bad("no registered engine publishes with topic \"" + topic + "\"");
      return;
    }
    try {
      source.onLive(s, frames.get(2));
    } catch (RuntimeException e) {
      // a bug, not the engine's fault: log it and keep the subscriber alive
      LOG.log(Level.SEVERE, "ZMQ subscriber " + boundEndpoint + ": message " + s + " failed", e);
    }
  }

  private void bad(String why) {
    long n = counters.inc(Counters.C.BAD_FRAMES);
    if (SingleWriterCounters.shouldLog(n)) {
      LOG.warning("ZMQ subscriber " + boundEndpoint + ": message skipped: " + why);
    }
  }
}
