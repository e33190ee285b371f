package io.kvrouter.server;

import io.helidon.http.HeaderNames;
import io.helidon.webserver.http.ServerResponse;
import io.kvrouter.server.http.ApiException;

/**
 * The global bound on the blocks that routed requests hold while in flight (issue 31, #2): each
 * {@code POST /route} keeps its request's block hashes until it is freed or expires, so a client
 * that never frees could fill the heap.
 *
 * <pre>
 * Implementation notes
 *
 * No state of its own: the routers count what their requests in flight hold (KvRouter.heldBlocks,
 * every request's blocks counted whole, read without the router's lock), and check() sums them over
 * the live indexes before a route records anything. A route whose blocks would take the sum past
 * maxBlocks is a 429 with Retry-After, counted in kvrouter_route_rejections_total{reason=
 * "held_blocks"}. The check and the route are not one atomic step: routes running at once may
 * pass it together, so the bound is exceeded by at most what they hold (their bodies are bounded
 * by the in-flight body budget). The sum reads one LongAdder per registered model and routing
 * group, no lock. Read by the request threads; thread-safe as the routers are.
 * </pre>
 */
final class RouteBudget {
  private final Registry registry;
  private final ServerMetrics metrics;
  private final long maxBlocks;

  RouteBudget(Registry registry, ServerMetrics metrics, long maxBlocks) {
    this.registry = registry;
    this.metrics = metrics;
    this.maxBlocks = maxBlocks;
  }

  /** A 429 (with Retry-After on {@code res}) when {@code blocks} more would pass the bound. */
  void check(ModelIndex m, long blocks, ServerResponse res) {
    long held = 0;
    for (ModelIndex i : registry.indexes()) held += i.router.heldBlocks();
    if (held + blocks <= maxBlocks) return;
    metrics.routeRejected(m.key, "held_blocks");
    res.header(HeaderNames.RETRY_AFTER, "1");
    throw new ApiException(
        429,
        "the requests in flight hold "
            + held
            + " blocks and this one "
            + blocks
            + ", past the most this server keeps (--max-routed-blocks "
            + maxBlocks
            + "); free finished requests (POST /requests/{id}/free) or retry later; nothing"
            + " recorded");
  }
}
