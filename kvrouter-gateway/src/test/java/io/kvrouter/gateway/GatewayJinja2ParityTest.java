package io.kvrouter.gateway;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import io.kvrouter.mockengine.MockEngineServer;
import io.kvrouter.server.KvRouterServer;
import io.kvrouter.server.ServerHost.Registration;
import io.kvrouter.tokenize.Jinja2Reference;
import io.kvrouter.tokenize.JsonValues;
import io.kvrouter.tokenize.Tokenizer;
import io.kvrouter.tokenize.ToolChats;
import java.net.http.HttpResponse;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Tool-calling chats through the gateway's {@code /tokenize} and the mock engine's, each template
 * sent as the request's {@code chat_template} (both started with --trust-request-chat-template):
 * the ids of the text Python's Jinja2 renders (parity/jinja2_reference.py), tokenized by the tiny
 * model's tokenizer, for every template of the tokenize module's Jinja2ParityTest; a conversation
 * Jinja2 refuses is refused (400) by both.
 */
class GatewayJinja2ParityTest {
  private static final int CASES = 15;
  private static final JsonFactory JSON = new JsonFactory();
  private final List<AutoCloseable> open = new ArrayList<>();

  @AfterEach
  void close() throws Exception {
    for (int i = open.size() - 1; i >= 0; i--) open.get(i).close();
  }

  @Test
  void theGatewayAndTheMockEngineTokenizeAsJinja2Renders() throws Exception {
    Gateway g =
        Gateway.start(
            KvRouterServer.Config.builder().port(0).maxBodyBytes(1 << 20).build(),
            GatewayConfig.builder()
                .model("tiny", GatewayStubTest.tiny())
                .chat(new GatewayConfig.Chat(null, null, true))
                .build());
    open.add(g);
    MockEngineServer e =
        MockEngineServer.start(
            GatewayMockEngineTest.tinyEngine().trustRequestChatTemplate(true).build());
    open.add(e);
    g.host.register(Registration.of("tiny", GatewayMockEngineTest.BS, 1, 0, e.url()));

    List<Jinja2Reference.Case> cases = new ArrayList<>();
    List<String> bodies = new ArrayList<>();
    List<String> names = new ArrayList<>();
    for (Map.Entry<String, String> t : Jinja2Reference.templates().entrySet()) {
      List<ToolChats.Chat> chats =
          ToolChats.generate(
              0x9a7e ^ t.getKey().hashCode(), CASES, Jinja2Reference.maxParallel(t.getKey()));
      for (ToolChats.Chat c : chats) {
        cases.add(
            new Jinja2Reference.Case(
                t.getValue(),
                c.messages(),
                c.tools(),
                Map.of(),
                true,
                Jinja2Reference.tinySpecials(),
                "auto"));
        Map<String, Object> body = new LinkedHashMap<>();
        body.put("model", "tiny");
        body.put("messages", c.messages());
        if (c.tools() != null) body.put("tools", c.tools());
        body.put("chat_template", t.getValue());
        bodies.add(ToolChats.toJson(body));
        names.add(t.getKey());
      }
    }
    List<Jinja2Reference.Result> ref = Jinja2Reference.render(cases);
    int same = 0;
    int refused = 0;
    List<String> failures = new ArrayList<>();
    try (Tokenizer tok = Tokenizer.load(GatewayStubTest.tiny())) {
      for (int i = 0; i < cases.size(); i++) {
        HttpResponse<String> viaGateway =
            GatewayMockEngineTest.post(g.url(), "/tokenize", bodies.get(i));
        HttpResponse<String> viaEngine =
            GatewayMockEngineTest.post(e.url(), "/tokenize", bodies.get(i));
        String what = names.get(i) + " case " + (i % CASES);
        Jinja2Reference.Result want = ref.get(i);
        if (want.error() != null) {
          if (viaGateway.statusCode() == 400 && viaEngine.statusCode() == 400) refused++;
          else failures.add(what + ": Jinja2 refused (" + want.error() + "), not both of them");
          continue;
        }
        List<Long> wantIds = new ArrayList<>();
        for (int id : tok.encodeUncached(want.text(), false)) wantIds.add((long) id);
        for (HttpResponse<String> r : List.of(viaGateway, viaEngine)) {
          if (r.statusCode() != 200) {
            failures.add(what + ": " + r.uri() + " answered " + r.statusCode() + " " + r.body());
          } else if (!tokens(r.body()).equals(wantIds)) {
            failures.add(what + ": " + r.uri() + " gave other ids than Jinja2's text");
          }
        }
        if (viaGateway.statusCode() == 200
            && viaEngine.statusCode() == 200
            && tokens(viaGateway.body()).equals(wantIds)
            && tokens(viaEngine.body()).equals(wantIds)) {
          same++;
        }
      }
    }
    assertThat(failures).as(same + " same, " + refused + " refused by all").isEmpty();
    assertThat(same).isGreaterThan(cases.size() / 2);
  }

  private static List<?> tokens(String body) throws Exception {
    try (JsonParser p = JSON.createParser(body)) {
      p.nextToken();
      return (List<?>) ((Map<?, ?>) JsonValues.read(p)).get("tokens");
    }
  }
}
