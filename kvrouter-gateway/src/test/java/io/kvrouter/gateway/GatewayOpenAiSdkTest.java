package io.kvrouter.gateway;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.core.JsonParser;
import io.kvrouter.mockengine.KvEventsConfig;
import io.kvrouter.mockengine.MockEngineServer;
import io.kvrouter.mockengine.NodeSdkCheck;
import io.kvrouter.server.KvRouterServer;
import io.kvrouter.server.RouterModel;
import io.kvrouter.server.ServerHost.Registration;
import io.kvrouter.tokenize.JsonValues;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The official OpenAI JavaScript SDK ({@code openai} from npm, clients/openai-node, pinned by its
 * lock file) talks to mock engines through the gateway: several concurrent clients stream chat
 * completions (and the other three calls) and read every token and the usage. Needs {@code
 * clients/openai-node/install.sh} (.ci/run runs it); {@code -Dkvrouter.sdk.skip=true} leaves it out
 * on purpose.
 */
class GatewayOpenAiSdkTest {
  @Test
  void concurrentSdkClientsStreamThroughTheGateway() throws Exception {
    NodeSdkCheck.requireSdk();
    List<AutoCloseable> open = new ArrayList<>();
    try {
      Gateway g =
          Gateway.start(
              KvRouterServer.Config.builder().port(0).build(),
              GatewayConfig.builder()
                  .model("tiny", GatewayStubTest.tiny())
                  .apiKey("sdk-key")
                  .build());
      open.add(g);
      RouterModel m = null;
      for (int i = 1; i <= 3; i++) {
        MockEngineServer e =
            MockEngineServer.start(
                MockEngineServer.Config.builder()
                    .modelDir(GatewayStubTest.tiny())
                    .servedModelName("tiny")
                    .blockSize(4)
                    .speedup(100)
                    .enablePromptTokensDetails(true)
                    .kvEvents(KvEventsConfig.zmq("tcp://127.0.0.1:*", "tcp://127.0.0.1:*"))
                    .build());
        open.add(e);
        m =
            g.host.register(
                Registration.of("tiny", 4, i, 0, e.url())
                    .withEvents(e.zmqEndpoint(), e.replayEndpoint()));
      }
      NodeSdkCheck.Result run =
          NodeSdkCheck.run(
              g.url() + "/v1",
              "tiny",
              "--api-key",
              "sdk-key",
              "--concurrency",
              "6",
              "--max-tokens",
              "6");
      String out = run.out();
      Map<?, ?> summary;
      try (JsonParser jp = Json.FACTORY.createParser(out)) {
        jp.nextToken();
        summary = (Map<?, ?>) JsonValues.read(jp);
      }
      assertThat((List<?>) summary.get("errors")).as(out).isEmpty();
      assertThat(run.exitValue()).as(out).isZero();
      assertThat(summary.get("models")).isEqualTo(List.of("tiny"));
      List<?> results = (List<?>) summary.get("results");
      assertThat(results).hasSize(24); // 4 operations x 6 concurrent clients
      for (Object o : results) {
        Map<?, ?> r = (Map<?, ?>) o;
        String op = (String) r.get("op");
        Map<?, ?> usage = (Map<?, ?>) r.get("usage");
        assertThat(usage.get("completion_tokens")).as(op).isEqualTo(6L);
        assertThat(r.get("finish_reason")).as(op).isEqualTo("length");
        assertThat((String) r.get("text")).as(op).isNotEmpty();
        if (op.endsWith("stream")) {
          // every token: a role chunk (chat), one chunk per token, and the usage chunk it asked for
          assertThat(r.get("chunks")).as(op).isEqualTo(op.startsWith("chat") ? 8L : 7L);
        }
      }
      assertThat(m.router().inFlight()).isZero();
      String metrics = GatewayStubTest.metrics(g);
      long answered = 0;
      for (String line : metrics.split("\n")) {
        if (line.startsWith("kvrouter_gateway_requests_total{")
            && line.contains("status=\"200\"")) {
          answered += (long) Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
        }
      }
      assertThat(answered).isEqualTo(24);
    } finally {
      for (int i = open.size() - 1; i >= 0; i--) open.get(i).close();
    }
  }
}
