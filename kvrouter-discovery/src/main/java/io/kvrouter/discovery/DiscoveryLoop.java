package io.kvrouter.discovery;

import static java.util.Objects.requireNonNull;

import io.fabric8.kubernetes.api.model.GenericKubernetesResource;
import io.fabric8.kubernetes.api.model.ListOptionsBuilder;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodList;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientException;
import io.fabric8.kubernetes.client.Watch;
import io.fabric8.kubernetes.client.Watcher;
import io.fabric8.kubernetes.client.WatcherException;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.logging.Level;
import java.util.logging.Logger;
import org.jspecify.annotations.Nullable;

/**
 * The discovery's state machine: lists and watches the pods (and the InferencePool), keeps the
 * engines handed to the sink equal to the engines of the Ready pods, retries what failed.
 *
 * <pre>
 * Implementation notes
 *
 * One thread owns everything: every field below the constructor's is read and written only by
 * tasks of exec (a single-threaded scheduler). The client's watch callbacks run on the client's
 * threads and only post tasks (post()), tagged with the generation of the watch they belong to;
 * a task of a watch that has since been replaced is dropped. The sink is called on exec as well,
 * so its calls are serial.
 *
 * List + watch, written here rather than a SharedIndexInformer: the pods are listed in full
 * (no resourceVersion: a consistent read), the list replaces the view (pods it no longer holds
 * are GONE), then a watch starts from the list's resourceVersion. The client's own watch
 * reconnects are off (watchReconnectLimit 0, KubernetesDiscovery), so every end of a watch
 * reaches onClose here: 410 Gone re-lists at once, any other end (the API server unreachable, a
 * timeout, a closed connection) re-lists after a backoff (retryInitial doubling to retryMax,
 * reset by a list that succeeds). A re-list is how a change made while no watch was open is
 * seen; an informer re-watches from its last resourceVersion instead and re-lists only on 410.
 * A failed list leaves the view as it was: the engines last known stay registered while the
 * API server is away (the status says disconnected since when, and why).
 *
 * With an InferencePool the pool is read (get) and watched by name first; its selector and
 * target ports decide what the pods' list and watch select. A new selector re-lists the pods
 * (those it drops are UNSELECTED); new ports only change the engines (CHANGED); a pool deleted,
 * not found or invalid selects nothing (every engine UNSELECTED, the reason in lastError).
 *
 * reconcile() is level-triggered: it derives the desired engines from the whole view after
 * every change and compares them with registered (added, not removed): removals first (the
 * sink's drain runs asynchronously; the id waits in draining until its stage completes), then
 * adds of desired ids neither registered nor draining. An add that throws is retried after a
 * per-engine backoff (addRetries) by a scheduled reconcile. Snapshots for readers (status,
 * engines) are published through volatile fields after each task that changes state.
 * </pre>
 */
final class DiscoveryLoop {
  private static final Logger LOG = Logger.getLogger(KubernetesDiscovery.class.getName());

  private final KubernetesClient client;
  private final DiscoveryConfig config;
  private final EngineSink sink;
  private final Clock clock;
  private final ScheduledExecutorService exec;
  private volatile boolean closed;
  private volatile DiscoveryStatus status;
  private volatile List<DiscoveredEngine> engines = List.of();

  // owned by exec
  private @Nullable LabelSelector selector; // null: nothing selected (an InferencePool unknown)
  private @Nullable List<Integer> targetPorts; // null: no InferencePool's ports
  private Map<String, Pod> pods = new TreeMap<>();
  private final Map<String, RemovalReason> gone = new HashMap<>();
  private final Map<String, DiscoveredEngine> registered = new TreeMap<>();
  private final Map<String, DiscoveredEngine> draining = new HashMap<>();
  private final Map<String, AddRetry> addRetries = new HashMap<>();
  private Map<String, String> skipped = new TreeMap<>();
  private @Nullable Watch podWatch; // null: none open
  private long podGeneration;
  private boolean podWatchOpen;
  private @Nullable Watch poolWatch; // null: none open
  private long poolGeneration;
  private boolean poolWatchOpen;
  private final Backoff podBackoff;
  private final Backoff poolBackoff;
  private @Nullable ScheduledFuture<?> podRelist; // null: none scheduled
  private @Nullable ScheduledFuture<?> poolRelist; // null: none scheduled
  private @Nullable Instant lastSync; // null: before the first full list
  private @Nullable Instant disconnectedSince; // null: connected
  private @Nullable String lastError; // null: no error yet
  private @Nullable Instant lastErrorAt; // null: no error yet
  private long invalidPods;
  private long addFailures;
  private long lists;

  /** An engine whose add failed: not offered again before notBefore, unless it changes. */
  private record AddRetry(DiscoveredEngine engine, Instant notBefore, Duration nextDelay) {}

  /** Retry delays: initial, doubled per failure in a row up to max. */
  private static final class Backoff {
    private final Duration initial;
    private final Duration max;
    private Duration current;

    Backoff(Duration initial, Duration max) {
      this.initial = initial;
      this.max = max;
      this.current = initial;
    }

    Duration next() {
      Duration d = current;
      Duration doubled = current.multipliedBy(2);
      current = doubled.compareTo(max) > 0 ? max : doubled;
      return d;
    }

    void reset() {
      current = initial;
    }
  }

  DiscoveryLoop(
      KubernetesClient client,
      DiscoveryConfig config,
      EngineSink sink,
      Clock clock,
      ScheduledExecutorService exec) {
    this.client = client;
    this.config = config;
    this.sink = sink;
    this.clock = clock;
    this.exec = exec;
    this.podBackoff = new Backoff(config.retryInitial(), config.retryMax());
    this.poolBackoff = new Backoff(config.retryInitial(), config.retryMax());
    this.disconnectedSince = clock.instant();
    publish();
  }

  void start() {
    post(
        () -> {
          if (config.inferencePool() != null) {
            syncPool();
          } else {
            // the config names exactly one of an InferencePool and a label selector
            selector =
                LabelSelector.parse(
                    requireNonNull(config.labelSelector(), "labelSelector without a pool"));
            syncPods(RemovalReason.GONE);
          }
        });
  }

  DiscoveryStatus status() {
    return status;
  }

  List<DiscoveredEngine> engines() {
    return engines;
  }

  /**
   * Stops the watches and the thread (waiting up to {@code wait} for a sink call in progress); the
   * engines registered stay registered. Tasks queued behind the closing one are dropped.
   */
  void close(Duration wait) throws InterruptedException {
    try {
      exec.execute(
          () -> {
            closed = true;
            closePodWatch();
            closePoolWatch();
          });
    } catch (RejectedExecutionException e) {
      // closed already
    }
    exec.shutdown();
    if (!exec.awaitTermination(wait.toMillis(), TimeUnit.MILLISECONDS)) {
      exec.shutdownNow();
    }
    closed = true;
  }

  // ---- tasks (all on exec) ----

  private void post(Runnable task) {
    if (closed) return;
    try {
      exec.execute(() -> run(task));
    } catch (RejectedExecutionException e) {
      // closing: the task is moot
    }
  }

  private void run(Runnable task) {
    if (closed) return;
    try {
      task.run();
    } catch (RuntimeException e) {
      error("internal error: " + e, e);
    }
    publish();
  }

  private void syncPods(RemovalReason droppedReason) {
    cancel(podRelist);
    podRelist = null;
    closePodWatch();
    if (selector == null) {
      for (String key : pods.keySet()) gone.put(key, droppedReason);
      pods = new TreeMap<>();
      reconcile();
      updateConnected();
      return;
    }
    String sel = selector.toString();
    PodList list;
    try {
      list =
          client
              .pods()
              .inNamespace(config.namespace())
              .list(new ListOptionsBuilder().withLabelSelector(sel).build());
    } catch (KubernetesClientException e) {
      error(
          "listing pods of " + config.namespace() + " selected by '" + sel + "': " + reason(e), e);
      Duration d = podBackoff.next();
      podRelist = later(() -> syncPods(RemovalReason.GONE), d);
      updateConnected();
      return;
    }
    lists++;
    lastSync = clock.instant();
    Map<String, Pod> fresh = new TreeMap<>();
    for (Pod p : list.getItems()) fresh.put(PodEngines.key(p), p);
    for (String key : pods.keySet()) {
      if (!fresh.containsKey(key)) gone.put(key, droppedReason);
    }
    pods = fresh;
    reconcile();
    openPodWatch(sel, list.getMetadata().getResourceVersion());
  }

  private void openPodWatch(String sel, String resourceVersion) {
    long generation = ++podGeneration;
    try {
      podWatch =
          client
              .pods()
              .inNamespace(config.namespace())
              .watch(
                  new ListOptionsBuilder()
                      .withLabelSelector(sel)
                      .withResourceVersion(resourceVersion)
                      .withAllowWatchBookmarks(true)
                      .build(),
                  new Watcher<Pod>() {
                    @Override
                    public void eventReceived(Action action, Pod pod) {
                      post(() -> onPodEvent(generation, action, pod));
                    }

                    @Override
                    public void onClose(WatcherException cause) {
                      post(() -> onPodWatchClosed(generation, cause));
                    }

                    @Override
                    public void onClose() {
                      post(() -> onPodWatchClosed(generation, null));
                    }
                  });
      podWatchOpen = true;
      podBackoff.reset();
    } catch (KubernetesClientException e) {
      error("watching pods selected by '" + sel + "': " + reason(e), e);
      podRelist = later(() -> syncPods(RemovalReason.GONE), podBackoff.next());
    }
    updateConnected();
  }

  private void onPodEvent(long generation, Watcher.Action action, Pod pod) {
    if (generation != podGeneration || pod == null || pod.getMetadata() == null) return;
    String key = PodEngines.key(pod);
    switch (action) {
      case ADDED, MODIFIED -> {
        pods.put(key, pod);
        gone.remove(key);
      }
      case DELETED -> {
        pods.remove(key);
        gone.put(key, RemovalReason.GONE);
      }
      default -> {
        return; // BOOKMARK, ERROR: the watch manager handles them
      }
    }
    reconcile();
  }

  private void onPodWatchClosed(long generation, @Nullable WatcherException cause) {
    if (generation != podGeneration) return;
    podWatch = null;
    podWatchOpen = false;
    updateConnected();
    if (cause != null && cause.isHttpGone()) {
      LOG.fine(() -> "discovery: pods watch expired (410 Gone), listing again");
      syncPods(RemovalReason.GONE);
      return;
    }
    error(
        "pods watch closed"
            + (cause == null ? "" : ": " + cause.getMessage())
            + "; listing again after a backoff",
        cause);
    podRelist = later(() -> syncPods(RemovalReason.GONE), podBackoff.next());
  }

  private void syncPool() {
    cancel(poolRelist);
    poolRelist = null;
    closePoolWatch();
    GenericKubernetesResource pool;
    try {
      pool =
          client
              .genericKubernetesResources(PoolTarget.CONTEXT)
              .inNamespace(config.namespace())
              .withName(config.inferencePool())
              .get();
    } catch (KubernetesClientException e) {
      error("reading InferencePool " + poolName() + ": " + reason(e), e);
      poolRelist = later(this::syncPool, poolBackoff.next());
      updateConnected();
      return;
    }
    applyPool(pool, pool == null ? "not found" : null);
    long generation = ++poolGeneration;
    try {
      Watcher<GenericKubernetesResource> watcher =
          new Watcher<>() {
            @Override
            public void eventReceived(Action action, GenericKubernetesResource resource) {
              post(() -> onPoolEvent(generation, action, resource));
            }

            @Override
            public void onClose(WatcherException cause) {
              post(() -> onPoolWatchClosed(generation, cause));
            }

            @Override
            public void onClose() {
              post(() -> onPoolWatchClosed(generation, null));
            }
          };
      var resource =
          client
              .genericKubernetesResources(PoolTarget.CONTEXT)
              .inNamespace(config.namespace())
              .withName(config.inferencePool());
      poolWatch =
          resource.watch(
              new ListOptionsBuilder()
                  .withResourceVersion(
                      pool == null ? null : pool.getMetadata().getResourceVersion())
                  .build(),
              watcher);
      poolWatchOpen = true;
      poolBackoff.reset();
    } catch (KubernetesClientException e) {
      error("watching InferencePool " + poolName() + ": " + reason(e), e);
      poolRelist = later(this::syncPool, poolBackoff.next());
    }
    updateConnected();
  }

  private void onPoolEvent(long generation, Watcher.Action action, GenericKubernetesResource r) {
    if (generation != poolGeneration) return;
    switch (action) {
      case ADDED, MODIFIED -> applyPool(r, null);
      case DELETED -> applyPool(null, "deleted");
      default -> {
        // BOOKMARK, ERROR: the watch manager handles them
      }
    }
  }

  private void onPoolWatchClosed(long generation, @Nullable WatcherException cause) {
    if (generation != poolGeneration) return;
    poolWatch = null;
    poolWatchOpen = false;
    updateConnected();
    if (cause != null && cause.isHttpGone()) {
      syncPool();
      return;
    }
    error(
        "InferencePool watch closed"
            + (cause == null ? "" : ": " + cause.getMessage())
            + "; reading it again after a backoff",
        cause);
    poolRelist = later(this::syncPool, poolBackoff.next());
  }

  /** Takes the pool's target (null pool: {@code missing} says why there is none). */
  private void applyPool(@Nullable GenericKubernetesResource pool, @Nullable String missing) {
    PoolTarget target = null;
    if (pool == null) {
      error("InferencePool " + poolName() + " " + missing + ": no engines selected", null);
    } else {
      try {
        target = PoolTarget.of(pool);
      } catch (IllegalArgumentException e) {
        error("InferencePool " + poolName() + " is invalid: " + e.getMessage(), null);
      }
    }
    LabelSelector newSelector = target == null ? null : target.selector();
    targetPorts = target == null ? null : target.ports();
    if (!Objects.equals(newSelector, selector) || (newSelector != null && !podWatchOpen)) {
      boolean changed = !Objects.equals(newSelector, selector);
      selector = newSelector;
      if (changed) {
        LOG.info(
            () ->
                "discovery: InferencePool "
                    + poolName()
                    + " selects "
                    + (selector == null ? "nothing" : "'" + selector + "'"));
      }
      syncPods(RemovalReason.UNSELECTED);
    } else {
      reconcile();
    }
  }

  private String poolName() {
    return config.namespace() + "/" + config.inferencePool();
  }

  /** Runs {@code task} on exec after {@code delay}: a re-list, a re-read, a retried add. */
  private @Nullable ScheduledFuture<?> later(Runnable task, Duration delay) {
    if (closed) return null;
    try {
      return exec.schedule(() -> run(task), delay.toMillis(), TimeUnit.MILLISECONDS);
    } catch (RejectedExecutionException e) {
      return null;
    }
  }

  private static void cancel(@Nullable ScheduledFuture<?> f) {
    if (f != null) f.cancel(false);
  }

  private void closePodWatch() {
    podGeneration++;
    podWatchOpen = false;
    if (podWatch != null) {
      Watch w = podWatch;
      podWatch = null;
      closeQuietly(w);
    }
  }

  private void closePoolWatch() {
    poolGeneration++;
    poolWatchOpen = false;
    if (poolWatch != null) {
      Watch w = poolWatch;
      poolWatch = null;
      closeQuietly(w);
    }
  }

  private static void closeQuietly(Watch w) {
    try {
      w.close();
    } catch (RuntimeException e) {
      LOG.log(Level.FINE, "discovery: closing a watch", e);
    }
  }

  private void updateConnected() {
    boolean poolOk = config.inferencePool() == null || poolWatchOpen;
    boolean podsOk = selector == null ? config.inferencePool() != null : podWatchOpen;
    boolean connected = poolOk && podsOk;
    if (connected) {
      disconnectedSince = null;
    } else if (disconnectedSince == null) {
      disconnectedSince = clock.instant();
    }
  }

  // ---- reconciliation ----

  private void reconcile() {
    Instant now = clock.instant();
    Map<String, DiscoveredEngine> desired = new TreeMap<>();
    Map<String, RemovalReason> notServing = new HashMap<>();
    Map<String, String> skippedNow = new TreeMap<>();
    for (Map.Entry<String, Pod> e : pods.entrySet()) {
      String key = e.getKey();
      Pod pod = e.getValue();
      RemovalReason why = PodEngines.notServing(pod);
      if (why == RemovalReason.TERMINATING) {
        notServing.put(key, why);
        continue;
      }
      PodEngines.Result r = PodEngines.of(pod, config, targetPorts);
      String invalid = r.invalid();
      if (invalid != null) {
        skippedNow.put(key, invalid);
        if (!invalid.equals(skipped.get(key))) {
          invalidPods++;
          LOG.warning("discovery: skipping pod " + key + ": " + invalid);
        }
        notServing.put(key, why == null ? RemovalReason.INVALID : why);
        continue;
      }
      if (why != null) {
        notServing.put(key, why);
        continue;
      }
      // exactly one of the two is non-null: a valid pod's engines
      for (DiscoveredEngine engine : requireNonNull(r.engines(), "engines")) {
        desired.put(engine.id(), engine);
      }
    }
    skipped = skippedNow;

    for (DiscoveredEngine have : new ArrayList<>(registered.values())) {
      DiscoveredEngine want = desired.get(have.id());
      if (have.equals(want)) continue;
      RemovalReason why;
      if (want != null) {
        why = RemovalReason.CHANGED;
      } else if (notServing.containsKey(have.pod())) {
        why = notServing.get(have.pod());
      } else if (pods.containsKey(have.pod())) {
        why = RemovalReason.CHANGED; // the pod serves, this rank no longer
      } else {
        why = gone.getOrDefault(have.pod(), RemovalReason.GONE);
      }
      startRemoval(have, why);
    }
    gone.clear();

    addRetries.keySet().retainAll(desired.keySet());
    for (DiscoveredEngine want : desired.values()) {
      String id = want.id();
      if (registered.containsKey(id) || draining.containsKey(id)) continue;
      AddRetry retry = addRetries.get(id);
      if (retry != null && retry.engine().equals(want) && now.isBefore(retry.notBefore())) {
        continue;
      }
      try {
        sink.add(want);
        registered.put(id, want);
        addRetries.remove(id);
        LOG.info(
            () ->
                "discovery: added engine "
                    + id
                    + " "
                    + want.baseUrl()
                    + " model "
                    + want.model()
                    + (want.eventsEndpoint() == null ? "" : " events " + want.eventsEndpoint()));
      } catch (Exception e) {
        addFailures++;
        Duration delay =
            retry != null && retry.engine().equals(want)
                ? retry.nextDelay()
                : config.retryInitial();
        Duration doubled = delay.multipliedBy(2);
        addRetries.put(
            id,
            new AddRetry(
                want,
                now.plus(delay),
                doubled.compareTo(config.retryMax()) > 0 ? config.retryMax() : doubled));
        error("engine " + id + " (" + want.baseUrl() + ") not added: " + e.getMessage(), e);
        ScheduledFuture<?> unused = later(this::reconcile, delay);
      }
    }
  }

  private void startRemoval(DiscoveredEngine engine, RemovalReason why) {
    registered.remove(engine.id());
    draining.put(engine.id(), engine);
    addRetries.remove(engine.id());
    LOG.info(() -> "discovery: removing engine " + engine.id() + " (" + why.wireName() + ")");
    CompletionStage<Void> stage;
    try {
      stage = sink.remove(engine, why);
    } catch (RuntimeException e) {
      stage = CompletableFuture.failedFuture(e);
    }
    if (stage == null) stage = CompletableFuture.completedFuture(null);
    stage.whenComplete(
        (v, t) ->
            post(
                () -> {
                  if (t != null) {
                    LOG.log(
                        Level.WARNING,
                        "discovery: removing engine "
                            + engine.id()
                            + " failed (counted as removed)",
                        t);
                  }
                  draining.remove(engine.id(), engine);
                  reconcile();
                }));
  }

  // ---- status ----

  private void error(String message, @Nullable Throwable t) {
    lastError = message;
    lastErrorAt = clock.instant();
    if (t != null) {
      LOG.log(Level.WARNING, "discovery: " + message, LOG.isLoggable(Level.FINE) ? t : null);
    } else {
      LOG.warning("discovery: " + message);
    }
  }

  /** The client's message, with the root cause (e.g. {@code ConnectException}) when it has one. */
  private static String reason(KubernetesClientException e) {
    Throwable root = e;
    while (root.getCause() != null && root.getCause() != root) root = root.getCause();
    String m = (e.getCode() > 0 ? "HTTP " + e.getCode() + " " : "") + e.getMessage();
    if (root != e) {
      m += " (" + root.getClass().getSimpleName();
      m += root.getMessage() == null ? ")" : ": " + root.getMessage() + ")";
    }
    return m;
  }

  private void publish() {
    status =
        new DiscoveryStatus(
            config.describe(),
            selector == null ? null : selector.toString(),
            disconnectedSince == null,
            lastSync,
            disconnectedSince,
            lastError,
            lastErrorAt,
            registered.size(),
            draining.size(),
            skipped,
            invalidPods,
            addFailures,
            lists);
    engines = List.copyOf(registered.values());
  }
}
