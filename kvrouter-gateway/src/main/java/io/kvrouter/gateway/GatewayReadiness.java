package io.kvrouter.gateway;

import io.kvrouter.route.EngineRole;
import io.kvrouter.server.RouterModel;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;

/**
 * The gateway's part of {@code GET /ready}: every configured model ({@code --model}) needs at least
 * one engine rank that can serve a request now, else the reason names the first model that has none
 * and why each of its ranks does not count.
 *
 * <pre>
 * Implementation notes
 *
 * Stateless; computed per /ready request on its thread from the registered ranks (the server's
 * indexes) and the gateway's EngineStates. A rank counts when it has a base URL, its engine
 * answered a health check and is healthy now, it is not being drained, its KV events listener
 * (if it has an endpoint) is connected, and it can decode (role both or decode: prefill engines
 * alone cannot answer). An engine never checked yet (registered with POST /register since the
 * last health round) does not count: the health checker is woken so that its first check comes
 * at once rather than after the interval. Only Engines.get is used, never engine(): /ready makes
 * no state.
 * </pre>
 */
final class GatewayReadiness {
  private GatewayReadiness() {}

  /** What one model's ranks are, for the reason. */
  private static final class Count {
    int ranks;
    int ready;
    int noUrl;
    int unchecked;
    int unhealthy;
    int draining;
    int listener;
    String listenerState;
    int prefillOnly;

    String why(String model) {
      if (ranks == 0) {
        return "model '"
            + model
            + "' has no engine registered (--engine, POST /register with base_url, or"
            + " --discovery)";
      }
      List<String> parts = new ArrayList<>();
      part(parts, unchecked, "not answering GET /health yet");
      part(parts, unhealthy, "failing its health checks");
      part(parts, draining, "being drained");
      part(parts, listener, "with its KV events listener " + listenerState);
      part(parts, prefillOnly, "prefill-only (a decode or both engine is needed)");
      part(parts, noUrl, "without base_url");
      return "model '"
          + model
          + "' has no engine ready to serve: of its "
          + ranks
          + " registered rank(s), "
          + String.join(", ", parts);
    }

    private static void part(List<String> parts, int n, String what) {
      if (n > 0) parts.add(n + " " + what);
    }
  }

  /**
   * Why the gateway should not take traffic, or null when every model in {@code models} has a rank
   * that counts.
   *
   * @param wake called (once) when a rank's engine was never checked
   */
  static String reason(
      Collection<String> models, List<RouterModel> indexes, Engines engines, Runnable wake) {
    String first = null;
    int failing = 0;
    boolean woken = false;
    for (String model : models) {
      Count c = new Count();
      for (RouterModel m : indexes) {
        if (m.modelName().equals(model)) count(m, engines, c);
      }
      if (c.unchecked > 0 && !woken) {
        wake.run();
        woken = true;
      }
      if (c.ready > 0) continue;
      if (failing++ == 0) first = c.why(model);
    }
    if (failing <= 1) return first;
    return first + "; and " + (failing - 1) + " more model(s) without a ready engine";
  }

  private static void count(RouterModel m, Engines engines, Count c) {
    for (RouterModel.Rank r : m.ranks()) {
      c.ranks++;
      if (r.baseUrl() == null) {
        c.noUrl++;
        continue;
      }
      EngineState s = engines.get(r.baseUrl());
      if (s == null || (!s.answered() && s.healthy())) {
        c.unchecked++;
      } else if (!s.healthy()) {
        c.unhealthy++;
      } else if (s.draining()) {
        c.draining++;
      } else {
        String l = m.listenerState(r.worker());
        if (l != null && !l.equals("connected")) {
          c.listener++;
          c.listenerState = l;
        } else if (r.role() == EngineRole.PREFILL) {
          c.prefillOnly++;
        } else {
          c.ready++;
        }
      }
    }
  }
}
