package io.kvrouter.discovery;

import io.fabric8.kubernetes.client.Config;
import io.fabric8.kubernetes.client.ConfigBuilder;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientBuilder;
import io.fabric8.kubernetes.client.dsl.base.CustomResourceDefinitionContext;
import io.fabric8.kubernetes.client.server.mock.KubernetesCrudDispatcher;
import io.fabric8.kubernetes.client.server.mock.KubernetesMockServer;
import io.fabric8.mockwebserver.Context;
import io.fabric8.mockwebserver.MockWebServer;
import io.fabric8.mockwebserver.http.Dispatcher;
import io.fabric8.mockwebserver.http.MockResponse;
import io.fabric8.mockwebserver.http.RecordedRequest;
import io.fabric8.mockwebserver.http.Response;
import io.fabric8.mockwebserver.http.WebSocket;
import io.fabric8.mockwebserver.http.WebSocketListener;
import java.net.InetAddress;
import java.util.HashMap;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicReference;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * fabric8's KubernetesMockServer in CRUD mode, twice over one store: the "API server" the discovery
 * talks to, which a test can stop and start again on the same port (an outage), and an admin server
 * the test's own client talks to, which stays up (so pods can change during the outage). Requests
 * to the API server are recorded (method and path) for the RBAC check; its next pods watch can be
 * held (answered by a WebSocket that sends nothing) and then expired with a 410 Gone ERROR event,
 * as an API server does when a watch's resourceVersion is too old.
 *
 * <p>Public for the CLI's tests (the discovery's test-jar): the gateway and serve wired to a
 * discovery go through the same faults.
 */
public final class MockApiServer implements AutoCloseable {
  static final CustomResourceDefinitionContext POOL_CRD =
      new CustomResourceDefinitionContext.Builder()
          .withGroup(PoolTarget.GROUP)
          .withVersion(PoolTarget.VERSION)
          .withKind(PoolTarget.KIND)
          .withPlural(PoolTarget.PLURAL)
          .withScope("Namespaced")
          .build();

  private static final String GONE_EVENT =
      "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\","
          + "\"metadata\":{},\"status\":\"Failure\",\"message\":\"too old resource version: 1 (42)\","
          + "\"reason\":\"Expired\",\"code\":410}}";

  // a line per request at INFO is noise in the test log; kept referenced so the level sticks
  private static final Logger MOCK_LOG = Logger.getLogger("io.fabric8.mockwebserver");

  static {
    MOCK_LOG.setLevel(Level.WARNING);
  }

  private final KubernetesCrudDispatcher crud = new KubernetesCrudDispatcher(List.of(POOL_CRD));
  private final List<String> requests = new CopyOnWriteArrayList<>();
  private final AtomicReference<HeldWatch> holdNext = new AtomicReference<>();
  private final KubernetesMockServer admin;
  private final KubernetesClient adminClient;
  private KubernetesMockServer api;
  private final int port;

  /** A pods watch answered by a WebSocket that sends nothing until {@link #expire()}. */
  public static final class HeldWatch {
    private final AtomicReference<WebSocket> socket = new AtomicReference<>();

    public boolean open() {
      return socket.get() != null;
    }

    /** Sends the 410 Gone ERROR event and closes the socket. */
    public void expire() {
      WebSocket ws = socket.get();
      ws.send(GONE_EVENT);
      ws.close(1000, "");
    }
  }

  public MockApiServer() {
    admin = server(new Forward(false));
    admin.init(InetAddress.getLoopbackAddress(), 0);
    adminClient = new KubernetesClientBuilder().withConfig(config(admin.getPort())).build();
    api = server(new Forward(true));
    api.init(InetAddress.getLoopbackAddress(), 0);
    port = api.getPort();
  }

  private KubernetesMockServer server(Dispatcher d) {
    return new KubernetesMockServer(new Context(), new MockWebServer(), new HashMap<>(), d, false);
  }

  private static Config config(int port) {
    return new ConfigBuilder(Config.empty())
        .withMasterUrl("http://127.0.0.1:" + port + "/")
        .withNamespace("test")
        .withHttp2Disable(true)
        .withRequestTimeout(30_000)
        .withConnectionTimeout(10_000)
        .build();
  }

  /** The API server's port (the same after {@link #startApi()}). */
  public int apiPort() {
    return port;
  }

  /** The client configuration of the API server (what the discovery is started with). */
  public Config apiConfig() {
    return config(port);
  }

  /** The test's own client, on the admin server (up during outages). */
  public KubernetesClient admin() {
    return adminClient;
  }

  /** Requests the API server received, as {@code "GET /api/v1/...?..."}. */
  public List<String> requests() {
    return requests;
  }

  /** Answers the next pods watch with a socket that stays silent until expired. */
  public HeldWatch holdNextPodsWatch() {
    HeldWatch h = new HeldWatch();
    holdNext.set(h);
    return h;
  }

  /** Stops the API server (the admin server stays up). */
  public void stopApi() {
    api.shutdown();
  }

  /** Starts the API server again on its port, over the same store. */
  public void startApi() {
    api = server(new Forward(true));
    api.init(InetAddress.getLoopbackAddress(), port);
  }

  @Override
  public void close() {
    adminClient.close();
    api.shutdown();
    admin.shutdown();
  }

  /** Forwards to the shared CRUD store; records and holds only for the API server. */
  private final class Forward extends Dispatcher {
    private final boolean isApi;

    Forward(boolean isApi) {
      this.isApi = isApi;
    }

    @Override
    public MockResponse dispatch(RecordedRequest request) {
      String path = request.getPath();
      if (isApi) {
        requests.add(request.getMethod() + " " + path);
        if (path.contains("/pods?") && path.contains("watch=true")) {
          HeldWatch h = holdNext.getAndSet(null);
          if (h != null) {
            return new MockResponse()
                .withWebSocketUpgrade(
                    new WebSocketListener() {
                      @Override
                      public void onOpen(WebSocket ws, Response r) {
                        h.socket.set(ws);
                      }
                    });
          }
        }
      }
      return crud.dispatch(request);
    }

    // the store outlives each server: a server that stops does not shut it down
    @Override
    public void shutdown() {}

    @Override
    public void releaseResources() {}
  }
}
