package io.kvrouter.cli;

import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodBuilder;
import io.fabric8.kubernetes.client.Config;
import io.fabric8.kubernetes.client.ConfigBuilder;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.kvrouter.discovery.MockApiServer;
import io.kvrouter.discovery.Pods;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * The discovery's MockApiServer (fabric8's KubernetesMockServer in CRUD mode: it stores objects and
 * serves lists and watches with label selectors as the API server does; an API server that can be
 * stopped and started again, a watch that can be held and expired with 410), the test's client for
 * it (on the admin server, up during outages), and engine pods as a kubelet reports them.
 */
final class KubeApi implements AutoCloseable {
  static final String NS = "llm";

  private final MockApiServer server;
  private final KubernetesClient admin;

  KubeApi() {
    server = new MockApiServer();
    admin = server.admin();
  }

  /** {@code http://127.0.0.1:PORT/}, the API server's URL. */
  String masterUrl() {
    return "http://127.0.0.1:" + server.apiPort() + "/";
  }

  /** The test's client (on the admin server, which stays up while the API server is stopped). */
  KubernetesClient admin() {
    return admin;
  }

  /** Answers the discovery's next pods watch with a socket that stays silent until expired. */
  MockApiServer.HeldWatch holdNextPodsWatch() {
    return server.holdNextPodsWatch();
  }

  /** Stops the API server the discovery talks to (the store and the admin server stay). */
  void stopApi() {
    server.stopApi();
  }

  /** Starts the API server again on its port, over the same store. */
  void startApi() {
    server.startApi();
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
   * An engine pod of {@link #NS}: container ports http and, when given (not 0), kv-events and
   * kv-replay; annotations as given (the discovery tests' builder).
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
    return Pods.pod(NS, name, labels, annotations, ip, ready, http, events, replay);
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
                    .withConditions(Pods.ready(ready))
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
    server.close();
  }
}
