package io.kvrouter.gateway;

import io.helidon.http.HeaderNames;
import io.helidon.webclient.api.HttpClientRequest;
import io.helidon.webclient.api.HttpClientResponse;
import io.helidon.webclient.api.WebClient;
import io.kvrouter.tokenize.EngineApi;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.logging.Level;
import java.util.logging.Logger;
import org.jspecify.annotations.Nullable;

/**
 * The gateway's health checker: every {@code --health-interval-ms} it prunes what the gateway keeps
 * of engines no longer registered ({@link Engines#prune}) and GETs {@code /health} of every
 * registered base URL, taking an engine out of routing after {@code --unhealthy-after} failed
 * checks in a row and back at its first answer.
 *
 * <pre>
 * Implementation notes
 *
 * One virtual thread (start() to stop()) runs the rounds; each check of a round runs on its own
 * virtual thread, and the round joins them. Between rounds it waits on a semaphore for the
 * interval: wake() (from /ready, when it meets an engine never checked) releases a permit, which
 * starts the next round at once. checkNow() checks one engine on the caller's thread (the
 * gateway's own registrations), concurrently with rounds: EngineState applies results under its
 * monitor. The checker's WebClient has its own connection pool
 * with the health timeout as its read timeout (not the proxy's: a pooled connection's idle monitor
 * gives up on it after the read timeout of its last request, see Gateway). closed is written by
 * stop() and read by the loop; the thread field is written by start() and read by stop(), both
 * on the gateway's owner's thread. EngineState.checked() decides, per engine, when the health
 * flips; this class only logs the flips.
 * </pre>
 */
final class EngineHealth {
  private static final Logger LOG = Gateway.LOG;

  private final Gateway gateway;
  private final GatewayConfig config;
  private final WebClient client;
  private final Semaphore wakeUp = new Semaphore(0);
  private @Nullable Thread thread; // null before start()
  private volatile boolean closed;

  EngineHealth(Gateway gateway, GatewayConfig config) {
    this.gateway = gateway;
    this.config = config;
    this.client =
        WebClient.builder()
            .shareConnectionCache(false)
            .socketOptions(s -> s.connectTimeout(config.healthTimeout()))
            .readTimeout(config.healthTimeout())
            .followRedirects(false)
            .build();
  }

  /** Starts the rounds. */
  void start() {
    thread = Thread.ofVirtual().name("kvrouter-gateway-health").start(this::loop);
  }

  private void loop() {
    long interval = config.healthInterval().toMillis();
    while (!closed) {
      try {
        if (wakeUp.tryAcquire(interval, TimeUnit.MILLISECONDS)) wakeUp.drainPermits();
      } catch (InterruptedException e) {
        return;
      }
      try {
        checkAll();
      } catch (RuntimeException e) {
        LOG.log(Level.WARNING, "health check round failed", e);
      }
    }
  }

  /** One round of health checks of every registered base URL (after pruning). */
  void checkAll() {
    EngineRounds.eachEngine(gateway.prune(), u -> check(gateway.engine(u)));
  }

  /** Starts the next round now (an engine waits for its first check). */
  void wake() {
    if (wakeUp.availablePermits() == 0) wakeUp.release();
  }

  /**
   * Checks one engine now, on the caller's thread; a failure takes it out of routing at once (as
   * {@link EngineState#registered}).
   *
   * @return null when it answered, else why not ({@code Connection refused}, {@code status 503})
   */
  String checkNow(EngineState s) {
    String why = probe(s);
    s.registered(why == null, config.unhealthyAfter());
    return why;
  }

  /** {@code GET /health}: null when it answered 200, else why not. */
  private String probe(EngineState s) {
    try (HttpClientResponse r = health(s.baseUrl, false)) {
      int code = r.status().code();
      return code == 200 ? null : "GET /health answered " + code;
    } catch (RuntimeException e) {
      return "GET /health failed: " + rootMessage(e);
    }
  }

  private static String rootMessage(Throwable e) {
    Throwable t = e;
    while (t.getCause() != null) t = t.getCause();
    return t.getMessage() == null ? t.getClass().getSimpleName() : t.getMessage();
  }

  private void check(EngineState s) {
    boolean ok = probe(s) == null;
    // LoRA placement: the adapters it has resident now (vLLM's /v1/models), when it answered
    if (ok) gateway.lora.poll(gateway.host, s.baseUrl);
    // an engine that answers and whose API is not known yet (registered before it was up)
    if (ok && gateway.engines.api(s.baseUrl) == null) {
      // not waited for: the probe completes its future with null rather than failing, and a
      // later round asks again while the API is still unknown
      CompletableFuture<EngineApi> unused = gateway.engines.learn(s.baseUrl, gateway.host);
    }
    if (s.checked(ok, config.unhealthyAfter())) {
      if (s.healthy()) {
        LOG.info("engine " + s.baseUrl + " answers its health check again: back in routing");
      } else {
        LOG.warning(
            "engine "
                + s.baseUrl
                + " failed "
                + config.unhealthyAfter()
                + " health checks in a row: out of routing until it answers (its index is kept)");
      }
    }
  }

  /**
   * {@code GET /health}; once more on a connection of its own when the pooled one expired as it was
   * taken (see Gateway.submit: possible when --health-interval-ms is below --health-timeout-ms).
   */
  private HttpClientResponse health(String baseUrl, boolean fresh) {
    HttpClientRequest rq = client.get().uri(baseUrl + "/health");
    if (fresh) return rq.header(HeaderNames.CONNECTION, "close").request();
    try {
      return rq.request();
    } catch (RuntimeException e) {
      if (!Proxy.failure(e).reason().equals(Proxy.STALE)) throw e;
      return health(baseUrl, true);
    }
  }

  /** Stops the rounds: interrupts the thread and waits for it (at most 5 s). */
  void stop() {
    closed = true;
    EngineRounds.stop(thread);
  }

  /** Closes the checker's connection pool (its idle connections and monitor thread). */
  void closeClient() {
    client.closeResource();
  }
}
