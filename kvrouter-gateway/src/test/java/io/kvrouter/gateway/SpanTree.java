package io.kvrouter.gateway;

import io.opentelemetry.sdk.trace.data.EventData;
import io.opentelemetry.sdk.trace.data.SpanData;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;

/**
 * A trace as indented text, for docs/observability.md: each span with its kind, duration, status,
 * attributes (sorted by key) and events, children under their parent in start order.
 */
final class SpanTree {
  private SpanTree() {}

  static String render(List<SpanData> spans) {
    StringBuilder b = new StringBuilder();
    for (SpanData root : children(spans, null)) render(spans, root, 0, b);
    return b.toString();
  }

  private static List<SpanData> children(List<SpanData> spans, SpanData parent) {
    return spans.stream()
        .filter(
            s ->
                parent == null
                    ? spans.stream().noneMatch(p -> p.getSpanId().equals(s.getParentSpanId()))
                    : s.getParentSpanId().equals(parent.getSpanId()))
        .sorted(Comparator.comparingLong(SpanData::getStartEpochNanos))
        .toList();
  }

  private static void render(List<SpanData> spans, SpanData s, int depth, StringBuilder b) {
    String pad = "  ".repeat(depth);
    b.append(pad)
        .append(s.getName())
        .append("  ")
        .append(s.getKind())
        .append(
            String.format(
                Locale.ROOT, "  %.2f ms", (s.getEndEpochNanos() - s.getStartEpochNanos()) / 1e6))
        .append("  span ")
        .append(s.getSpanId());
    if (depth == 0) {
      b.append("  trace ").append(s.getTraceId()).append("  parent ").append(s.getParentSpanId());
    }
    if (!s.getStatus().getStatusCode().name().equals("UNSET")) {
      b.append("  status ").append(s.getStatus().getStatusCode());
      if (!s.getStatus().getDescription().isEmpty()) {
        b.append(" (").append(s.getStatus().getDescription()).append(')');
      }
    }
    b.append('\n');
    Map<String, Object> attrs = new TreeMap<>();
    s.getAttributes().forEach((k, v) -> attrs.put(k.getKey(), v));
    for (Map.Entry<String, Object> e : attrs.entrySet()) {
      b.append(pad)
          .append("    ")
          .append(e.getKey())
          .append(" = ")
          .append(e.getValue())
          .append('\n');
    }
    for (EventData e : s.getEvents()) {
      Map<String, Object> ea = new TreeMap<>();
      e.getAttributes().forEach((k, v) -> ea.put(k.getKey(), v));
      b.append(pad)
          .append("    event ")
          .append(e.getName())
          .append(
              String.format(
                  Locale.ROOT, " +%.2f ms", (e.getEpochNanos() - s.getStartEpochNanos()) / 1e6));
      if (!ea.isEmpty()) b.append(' ').append(ea);
      b.append('\n');
    }
    for (SpanData c : children(spans, s)) render(spans, c, depth + 1, b);
  }
}
