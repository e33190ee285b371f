package io.kvrouter.server;

import io.helidon.webserver.http.Handler;
import io.helidon.webserver.http.ServerRequest;
import io.kvrouter.event.Worker;
import io.kvrouter.server.http.ApiException;
import io.kvrouter.transport.kvevents.ClearScope;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.List;
import java.util.function.BooleanSupplier;

/**
 * The {@link ServerHost} a {@link KvRouterServer} gives its extension: views of its Registry, its
 * body reading (HttpPlumbing, through Api), its metrics registry and its registration path. Holds
 * no state of its own; thread-safe as what it delegates to.
 */
final class Host implements ServerHost {
  private final Registry registry;
  private final Api api;
  private final ServerMetrics metrics;
  private final KvRouterServer.Config config;
  private final BooleanSupplier serving;

  Host(
      Registry registry,
      Api api,
      ServerMetrics metrics,
      KvRouterServer.Config config,
      BooleanSupplier serving) {
    this.registry = registry;
    this.api = api;
    this.metrics = metrics;
    this.config = config;
    this.serving = serving;
  }

  @Override
  public RouterModel model(String modelName, String routingGroup) {
    return registry.get(new ModelKey(modelName, routingGroup));
  }

  @Override
  public List<RouterModel> models() {
    return new ArrayList<>(registry.indexes());
  }

  @Override
  public byte[] body(ServerRequest req) {
    try {
      return api.body(req);
    } catch (ApiException e) {
      throw new HttpError(e.status(), e.getMessage(), e.connectionLost());
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  @Override
  public boolean watchClient(Runnable onGone) {
    return api.watchClient(onGone);
  }

  @Override
  public Handler timedWrites(String endpoint, Handler h) {
    return api.timedWrites(endpoint, h);
  }

  @Override
  public void writesIdle() {
    api.writesIdle();
  }

  @Override
  public PrometheusRegistry metricsRegistry() {
    return metrics.registry();
  }

  @Override
  public RouterModel register(Registration r) {
    try {
      if (r.blockSize() < 1 || r.blockSize() > (1 << 20)) {
        throw ApiException.badRequest("block_size: must be in 1..1048576, got " + r.blockSize());
      }
      if (r.endpoint() == null && (r.replayEndpoint() != null || r.topic() != null)) {
        throw ApiException.badRequest("replay_endpoint and topic need an endpoint");
      }
      if (r.endpoint() == null && r.clearScope() != ClearScope.DEVICE) {
        throw ApiException.badRequest("all_blocks_cleared: given without endpoint");
      }
      return api.register(
          new ModelKey(r.modelName(), r.routingGroup()),
          r.blockSize(),
          new Worker(r.instanceId(), r.dpRank()),
          r.endpoint(),
          r.replayEndpoint(),
          r.endpoint() == null ? null : r.topic(),
          r.blockSize(),
          0,
          r.baseUrl(),
          r.role(),
          r.clearScope(),
          r.kvSource(),
          config.zmqConnectTimeout());
    } catch (ApiException e) {
      throw new HttpError(e.status(), e.getMessage(), false);
    }
  }

  @Override
  public int unregister(String modelName, String routingGroup, long instanceId, int dpRank) {
    try {
      return api.unregister(new Requests.Unregister(modelName, routingGroup, instanceId, dpRank));
    } catch (ApiException e) {
      throw new HttpError(e.status(), e.getMessage(), false);
    }
  }

  @Override
  public boolean serving() {
    return serving.getAsBoolean();
  }

  @Override
  public KvRouterServer.Config config() {
    return config;
  }
}
