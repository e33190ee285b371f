package io.kvrouter.server;

import io.helidon.webserver.http.HttpRouting;
import java.util.List;

/**
 * More endpoints on a {@link KvRouterServer}'s own web server, with access to its indexes: how the
 * gateway (io.kvrouter.gateway) serves {@code /v1/*} beside the router's endpoints in one process.
 * Given to {@link KvRouterServer#start(KvRouterServer.Config, ServerExtension)}.
 */
public interface ServerExtension {
  /**
   * Adds routes. Called once while the server is built (before it listens), after the router's own
   * endpoints and before the catch-all 404, on the thread that calls start.
   */
  void routing(HttpRouting.Builder routing, ServerHost host);

  /**
   * Called after a rank was registered ({@code POST /register}, {@link ServerHost#register}, the
   * NATS registration log or a warm start), on the registering thread and under the registry's
   * membership lock: it must return quickly and not register or unregister (the gateway starts its
   * probe of the engine's API here, on a thread of its own).
   */
  default void registered(RouterModel model, RouterModel.Rank rank) {}

  /**
   * Called by {@link KvRouterServer#stop()} after the web server stopped (requests in flight
   * finished or were cut off) and before the indexes close.
   */
  default void close() {}

  /**
   * Why the server should not take traffic yet, as the extension sees it (the gateway: a configured
   * model without a healthy engine), or null when nothing of the extension's holds it back. Asked
   * by every {@code GET /ready} after the server's own reasons (stopping, starting, listeners
   * connecting, NATS catching up); must be cheap and must not block.
   */
  default String notReadyReason() {
    return null;
  }

  /**
   * What {@code GET /dashboard} shows of one engine beyond the router's view.
   *
   * @param health one of: healthy; unhealthy; unchecked (no health check answered yet); draining
   * @param breaker the circuit breaker: {@code closed}, {@code half_open} or {@code open}
   */
  record EngineStatus(String health, String breaker) {}

  /**
   * The health and breaker of the engine at {@code baseUrl} (the gateway's), or null when the
   * extension does not check engines. Asked by {@code GET /dashboard/data}; must be cheap.
   */
  default EngineStatus engineStatus(String baseUrl) {
    return null;
  }

  /**
   * Requests waiting in {@code model}'s admission queue now, or -1 when the extension has no
   * admission queue for it. Asked by the dashboard's sampler every few seconds; must be cheap.
   */
  default int queueDepth(RouterModel model) {
    return -1;
  }

  /**
   * One extension made of several: their routes in order, {@link #notReadyReason()} the first
   * non-null one in order, {@link #close()} in reverse order (each close runs even when an earlier
   * one threw; the first failure is thrown after the others ran).
   */
  static ServerExtension of(ServerExtension... extensions) {
    List<ServerExtension> all = List.of(extensions);
    return new ServerExtension() {
      @Override
      public void routing(HttpRouting.Builder routing, ServerHost host) {
        for (ServerExtension e : all) e.routing(routing, host);
      }

      @Override
      public void registered(RouterModel model, RouterModel.Rank rank) {
        for (ServerExtension e : all) e.registered(model, rank);
      }

      @Override
      public String notReadyReason() {
        for (ServerExtension e : all) {
          String r = e.notReadyReason();
          if (r != null) return r;
        }
        return null;
      }

      @Override
      public EngineStatus engineStatus(String baseUrl) {
        for (ServerExtension e : all) {
          EngineStatus s = e.engineStatus(baseUrl);
          if (s != null) return s;
        }
        return null;
      }

      @Override
      public int queueDepth(RouterModel model) {
        for (ServerExtension e : all) {
          int d = e.queueDepth(model);
          if (d >= 0) return d;
        }
        return -1;
      }

      @Override
      public void close() {
        RuntimeException first = null;
        for (int i = all.size() - 1; i >= 0; i--) {
          try {
            all.get(i).close();
          } catch (RuntimeException e) {
            if (first == null) first = e;
            else first.addSuppressed(e);
          }
        }
        if (first != null) throw first;
      }
    };
  }
}
