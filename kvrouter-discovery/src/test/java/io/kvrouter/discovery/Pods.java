package io.kvrouter.discovery;

import io.fabric8.kubernetes.api.model.ContainerPort;
import io.fabric8.kubernetes.api.model.ContainerPortBuilder;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodBuilder;
import io.fabric8.kubernetes.api.model.PodCondition;
import io.fabric8.kubernetes.api.model.PodConditionBuilder;
import io.fabric8.kubernetes.client.KubernetesClient;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

/**
 * Pods as a kubelet would report them, and what the tests expect of them. Public for the CLI's
 * tests (the discovery's test-jar), which build their engine pods with {@link #pod(String, String,
 * Map, Map, String, boolean, int, int, int)}.
 */
public final class Pods {
  static final String NS = "test";

  private Pods() {}

  /**
   * An engine pod in {@link #NS}: container ports http (8000) and, when given, kv-events and
   * kv-replay.
   */
  static Pod pod(
      String name,
      Map<String, String> labels,
      String ip,
      boolean ready,
      Map<String, String> annotations,
      Integer events,
      Integer replay) {
    return pod(
        NS,
        name,
        labels,
        annotations,
        ip,
        ready,
        8000,
        events == null ? 0 : events,
        replay == null ? 0 : replay);
  }

  /**
   * An engine pod in {@code namespace}: container ports http and, when not 0, kv-events and
   * kv-replay; phase Running, with {@code ip} and a Ready condition.
   */
  public static Pod pod(
      String namespace,
      String name,
      Map<String, String> labels,
      Map<String, String> annotations,
      String ip,
      boolean ready,
      int http,
      int events,
      int replay) {
    List<ContainerPort> ports = new ArrayList<>();
    ports.add(new ContainerPortBuilder().withName("http").withContainerPort(http).build());
    if (events != 0) {
      ports.add(new ContainerPortBuilder().withName("kv-events").withContainerPort(events).build());
    }
    if (replay != 0) {
      ports.add(new ContainerPortBuilder().withName("kv-replay").withContainerPort(replay).build());
    }
    return new PodBuilder()
        .withNewMetadata()
        .withName(name)
        .withNamespace(namespace)
        .withLabels(labels)
        .withAnnotations(annotations)
        .endMetadata()
        .withNewSpec()
        .addNewContainer()
        .withName("engine")
        .withImage("vllm/vllm-openai")
        .withPorts(ports)
        .endContainer()
        .endSpec()
        .withNewStatus()
        .withPhase("Running")
        .withPodIP(ip)
        .withConditions(ready(ready))
        .endStatus()
        .build();
  }

  /** A Ready condition, True or False. */
  public static PodCondition ready(boolean ready) {
    return new PodConditionBuilder().withType("Ready").withStatus(ready ? "True" : "False").build();
  }

  /** Sets the pod's Ready condition. */
  static void setReady(KubernetesClient admin, String name, boolean ready) {
    admin
        .pods()
        .inNamespace(NS)
        .withName(name)
        .edit(p -> new PodBuilder(p).editStatus().withConditions(ready(ready)).endStatus().build());
  }

  /** Sets the pod's labels. */
  static void setLabels(KubernetesClient admin, String name, Map<String, String> labels) {
    admin
        .pods()
        .inNamespace(NS)
        .withName(name)
        .edit(p -> new PodBuilder(p).editMetadata().withLabels(labels).endMetadata().build());
  }

  /**
   * The ids {@code namespace/pod/0} of the pods that are Ready, not terminating, have an IP, and
   * carry {@code label=value}: what the sink should hold (single-rank pods), computed from the
   * store by the test.
   */
  static TreeSet<String> readyIds(KubernetesClient admin, String label, String value) {
    TreeSet<String> ids = new TreeSet<>();
    for (Pod p : admin.pods().inNamespace(NS).list().getItems()) {
      Map<String, String> l = p.getMetadata().getLabels();
      if (l == null || !value.equals(l.get(label))) continue;
      if (p.getMetadata().getDeletionTimestamp() != null) continue;
      if (p.getStatus() == null || p.getStatus().getPodIP() == null) continue;
      boolean ready =
          p.getStatus().getConditions().stream()
              .anyMatch(c -> c.getType().equals("Ready") && c.getStatus().equals("True"));
      if (ready) ids.add(NS + "/" + p.getMetadata().getName() + "/0");
    }
    return ids;
  }
}
