package io.kvrouter.discovery;

import io.fabric8.kubernetes.api.model.GenericKubernetesResource;
import io.fabric8.kubernetes.client.dsl.base.ResourceDefinitionContext;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * What an InferencePool ({@code inference.networking.k8s.io/v1}) selects: the label selector of its
 * {@code spec.selector.matchLabels} and the HTTP ports of its {@code spec.targetPorts[].number},
 * read from the resource as a {@link GenericKubernetesResource} (no CRD classes). Immutable.
 *
 * @param selector the pods' selector
 * @param ports the target ports in the pool's order (one to eight, distinct)
 */
record PoolTarget(LabelSelector selector, List<Integer> ports) {
  static final String GROUP = "inference.networking.k8s.io";
  static final String VERSION = "v1";
  static final String KIND = "InferencePool";
  static final String PLURAL = "inferencepools";

  /** The resource, given whole so that the client needs no API discovery call to find it. */
  static final ResourceDefinitionContext CONTEXT =
      new ResourceDefinitionContext.Builder()
          .withGroup(GROUP)
          .withVersion(VERSION)
          .withKind(KIND)
          .withPlural(PLURAL)
          .withNamespaced(true)
          .build();

  PoolTarget {
    ports = List.copyOf(ports);
  }

  /**
   * The target of {@code pool}.
   *
   * @throws IllegalArgumentException naming the field that is missing or wrong
   */
  static PoolTarget of(GenericKubernetesResource pool) {
    Object spec = pool.getAdditionalProperties().get("spec");
    if (!(spec instanceof Map<?, ?> s)) throw new IllegalArgumentException("it has no spec");
    Object selector = s.get("selector");
    if (!(selector instanceof Map<?, ?> sel)) {
      throw new IllegalArgumentException("it has no spec.selector");
    }
    for (Object k : sel.keySet()) {
      if (!"matchLabels".equals(k)) {
        throw new IllegalArgumentException(
            "spec.selector." + k + " is not supported (InferencePool v1 selects by matchLabels)");
      }
    }
    Object ml = sel.get("matchLabels");
    if (!(ml instanceof Map<?, ?> m) || m.isEmpty()) {
      throw new IllegalArgumentException(
          "spec.selector.matchLabels is missing or empty (it would select every pod)");
    }
    Map<String, String> labels = new LinkedHashMap<>();
    for (Map.Entry<?, ?> e : m.entrySet()) {
      if (!(e.getValue() instanceof String v)) {
        throw new IllegalArgumentException(
            "spec.selector.matchLabels." + e.getKey() + " is not a string");
      }
      labels.put(String.valueOf(e.getKey()), v);
    }
    LabelSelector ls;
    try {
      ls = LabelSelector.ofMatchLabels(labels);
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException("spec.selector.matchLabels: " + e.getMessage(), e);
    }
    Object tp = s.get("targetPorts");
    if (!(tp instanceof List<?> list) || list.isEmpty()) {
      throw new IllegalArgumentException("spec.targetPorts is missing or empty");
    }
    List<Integer> ports = new ArrayList<>();
    for (Object o : list) {
      Object n = o instanceof Map<?, ?> p ? p.get("number") : null;
      if (!(n instanceof Number num)
          || num.doubleValue() != num.intValue()
          || num.intValue() < 1
          || num.intValue() > 65535) {
        throw new IllegalArgumentException(
            "spec.targetPorts[" + ports.size() + "].number is not a port number: " + n);
      }
      if (ports.contains(num.intValue())) {
        throw new IllegalArgumentException(
            "spec.targetPorts names port " + num.intValue() + " twice");
      }
      ports.add(num.intValue());
    }
    return new PoolTarget(ls, ports);
  }
}
