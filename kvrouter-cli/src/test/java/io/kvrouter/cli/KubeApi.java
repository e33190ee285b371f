package io.kvrouter.cli;

import io.fabric8.kubernetes.api.model.ContainerPort;
import io.fabric8.kubernetes.api.model.ContainerPortBuilder;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodBuilder;
import io.fabric8.kubernetes.api.model.PodConditionBuilder;
import io.fabric8.kubernetes.client.Config;
import io.fabric8.kubernetes.client.ConfigBuilder;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientBuilder;
import io.fabric8.kubernetes.client.server.mock.KubernetesCrudDispatcher;
import io.fabric8.kubernetes.client.server.mock.KubernetesMockServer;
import io.fabric8.mockwebserver.Context;
import io.fabric8.mockwebserver.MockWebServer;
import java.net.InetAddress;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * fabric8's KubernetesMockServer in CRUD mode (it stores objects and serves lists and watches with
 * label selectors as the API server does), the test's client for it, and engine pods as a kubelet
 * reports them.
 */
final class KubeApi implements AutoCloseable {
  static final String NS = "llm";

  // a line per request at INFO is noise in the test log; kept referenced so the level sticks
  private static final Logger MOCK_LOG = Logger.getLogger("io.fabric8.mockwebserver");

  static {
    MOCK_LOG.setLevel(Level.WARNING);
  }

  private final KubernetesMockServer server;
  private final KubernetesClient admin;

  KubeApi() {
    server =
        new KubernetesMockServer(
            new Context(),
            new MockWebServer(),
            new HashMap<>(),
            new KubernetesCrudDispatcher(List.of()),
            false);
    server.init(InetAddress.getLoopbackAddress(), 0);
    admin = new KubernetesClientBuilder().withConfig(config()).build();
  }

  /** {@code http://127.0.0.1:PORT/}, the API server's URL. */
  String masterUrl() {
    return "http://127.0.0.1:" + server.getPort() + "/";
  }

  /** A client configuration for the mock API server (what the discovery is started with). */
  Config config() {
    return new ConfigBuilder(Config.empty())
        .withMasterUrl(masterUrl())
        .withNamespace(NS)
        .withHttp2Disable(true)
        .withRequestTimeout(30_000)
        .withConnectionTimeout(10_000)
        .build();
  }

  /** The JVM properties that point a child process's fabric8 auto-configuration at this server. */
  List<String> childProperties() {
    List<String> p = new ArrayList<>();
    p.add("-Dkubernetes.master=" + masterUrl());
    p.add("-Dkubernetes.auth.tryKubeConfig=false");
    p.add("-Dkubernetes.auth.tryServiceAccount=false");
    p.add("-Dkubernetes.namespace=" + NS);
    p.add("-Dhttp2.disable=true");
    return p;
  }

  /**
   * An engine pod: container ports http and, when given (not 0), kv-events and kv-replay;
   * annotations as given.
   */
  static Pod pod(
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
        .withNamespace(NS)
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
        .withConditions(
            new PodConditionBuilder()
                .withType("Ready")
                .withStatus(ready ? "True" : "False")
                .build())
        .endStatus()
        .build();
  }

  void create(Pod p) {
    admin.pods().inNamespace(NS).resource(p).create();
  }

  void setReady(String name, boolean ready) {
    admin
        .pods()
        .inNamespace(NS)
        .withName(name)
        .edit(
            p ->
                new PodBuilder(p)
                    .editStatus()
                    .withConditions(
                        new PodConditionBuilder()
                            .withType("Ready")
                            .withStatus(ready ? "True" : "False")
                            .build())
                    .endStatus()
                    .build());
  }

  void delete(String name) {
    admin.pods().inNamespace(NS).withName(name).delete();
  }

  /** The pods of the namespace now. */
  List<Pod> pods() {
    return admin.pods().inNamespace(NS).list().getItems();
  }

  /** Whether the pod's Ready condition is True. */
  static boolean ready(Pod p) {
    return p.getStatus().getConditions().stream()
        .anyMatch(c -> c.getType().equals("Ready") && c.getStatus().equals("True"));
  }

  @Override
  public void close() {
    admin.close();
    server.destroy();
  }
}
