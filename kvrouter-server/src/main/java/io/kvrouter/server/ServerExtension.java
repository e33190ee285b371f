package io.kvrouter.server;

import io.helidon.webserver.http.HttpRouting;

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
}
