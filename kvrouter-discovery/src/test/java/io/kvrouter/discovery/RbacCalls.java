package io.kvrouter.discovery;

import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * The RBAC (resource, verb) pairs of recorded API requests, as the API server would authorize them.
 */
final class RbacCalls {
  private RbacCalls() {}

  /** {@code "GET /api/v1/namespaces/ns/pods?watch=true"} and the like, to resource → verbs. */
  static Map<String, Set<String>> of(List<String> requests) {
    Map<String, Set<String>> out = new TreeMap<>();
    for (String r : requests) {
      String method = r.substring(0, r.indexOf(' '));
      String url = r.substring(r.indexOf(' ') + 1);
      String path = url.contains("?") ? url.substring(0, url.indexOf('?')) : url;
      String query = url.contains("?") ? url.substring(url.indexOf('?') + 1) : "";
      String[] p = path.substring(1).split("/");
      // api/v1/namespaces/NS/RES[/NAME] or apis/GROUP/VERSION/namespaces/NS/RES[/NAME]
      int at = p[0].equals("api") ? 2 : 3;
      if (p.length <= at + 2 || !p[at].equals("namespaces")) {
        throw new AssertionError("not a namespaced resource request: " + r);
      }
      String resource = p[at + 2] + (p[0].equals("api") ? "" : "." + p[1]);
      boolean named = p.length > at + 3;
      String verb;
      if (!method.equals("GET")) {
        throw new AssertionError("the discovery only reads, but sent " + r);
      } else if (query.contains("watch=true")) {
        verb = "watch";
      } else {
        verb = named ? "get" : "list";
      }
      out.computeIfAbsent(resource, k -> new TreeSet<>()).add(verb);
    }
    return out;
  }
}
