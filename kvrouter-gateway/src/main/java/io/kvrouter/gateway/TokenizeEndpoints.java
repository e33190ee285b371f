package io.kvrouter.gateway;

import com.fasterxml.jackson.core.JsonEncoding;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonToken;
import io.helidon.http.HeaderNames;
import io.helidon.webclient.api.HttpClientRequest;
import io.helidon.webclient.api.HttpClientResponse;
import io.helidon.webserver.http.ServerRequest;
import io.helidon.webserver.http.ServerResponse;
import io.kvrouter.tokenize.ChatRequest;
import io.kvrouter.tokenize.EngineApi;
import io.kvrouter.tokenize.EngineDialect;
import io.kvrouter.tokenize.EngineTokenizer;
import io.kvrouter.tokenize.TokenizerException;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.util.Arrays;
import java.util.function.Supplier;

/**
 * The gateway's {@code POST /tokenize} and {@code POST /detokenize}, in vLLM's shapes: answered
 * with the model's tokenizer when the gateway has one (the same tokenization as routing), else by
 * one of the model's engines: forwarded unchanged to a vLLM or SGLang engine and its answer
 * relayed, translated for another dialect (llama.cpp: its {@code /apply-template} and {@code
 * /tokenize}, through EngineTokenizer) and answered in vLLM's shape.
 *
 * <pre>
 * Implementation notes
 *
 * Stateless beyond the Gateway it reads (the server host, the model catalog, the engines, the
 * proxy's WebClient and configuration); runs on the request's virtual thread. A /tokenize body is
 * parsed as a chat request first and, when it has no messages, as a completion (vLLM accepts
 * both). The engine's dialect is what its probe said (Engines.learn, waited for when not known
 * yet). Refusals are OpenAiErrors, which the gateway's guard answers; an engine whose answer has
 * no tokens for a non-empty input, or a shape not known, is a 502 naming it, and one longer than
 * EngineTokenizer.MAX_ANSWER_BYTES a 502 engine_answer_too_large (read no further, counted). A
 * /detokenize id past the tokenizer's vocabulary (Tokenizer.vocabSize) is vLLM's 400 "Token id N
 * is out of vocabulary".
 * </pre>
 */
final class TokenizeEndpoints {
  private static final String JSON = "application/json";

  private final Gateway g;

  TokenizeEndpoints(Gateway g) {
    this.g = g;
  }

  void tokenize(ServerRequest req, ServerResponse res) throws Exception {
    byte[] body = g.host.body(req);
    ClientRequest c;
    try {
      c = ClientRequest.parse(ClientRequest.Kind.CHAT, body, g.config.maxRequestValues());
    } catch (OpenAiError e) {
      if (!"messages".equals(e.param)) throw e;
      c = ClientRequest.parse(ClientRequest.Kind.COMPLETION, body, g.config.maxRequestValues());
    }
    // vLLM's /tokenize has no tool_choice: the tools render whatever else the body holds
    ChatRequest chat = c.chat == null ? null : c.chat.withToolChoiceNone(false);
    ModelCatalog.Target t = g.target(c, null);
    if (t.tokenizer() == null) {
      String url = engineOf(t);
      if (speaksVllm(url)) {
        passToEngine(url, "/tokenize", body, res);
        return;
      }
      EngineTokenizer.Result r;
      try {
        EngineTokenizer et = g.engineTokenizer(url, c.model);
        r =
            c.kind == ClientRequest.Kind.CHAT
                ? et.tokenizeChat(chat)
                : c.promptIds != null
                    ? new EngineTokenizer.Result(c.promptIds, et.api().maxModelLen())
                    : et.tokenizePrompt(c.promptText, c.addSpecialTokens);
      } catch (TokenizerException e) {
        throw g.engineTokenizeFailed(e);
      }
      answer(res, r.tokens(), r.maxModelLen());
      return;
    }
    int[] ids;
    try {
      ClientRequest q = c;
      ids =
          q.kind != ClientRequest.Kind.CHAT && q.promptIds != null
              ? q.promptIds
              : g.tokenizers.run( // off the carrier threads, as the proxy's
                  () ->
                      q.kind == ClientRequest.Kind.CHAT
                          ? t.tokenizer().applyChatTemplate(chat).ids()
                          : t.tokenizer().encode(q.promptText, q.addSpecialTokens));
    } catch (TokenizerException e) {
      throw OpenAiError.invalid(null, null, e.getMessage());
    }
    long engineMax = g.engines.maxModelLen(g.host, t.baseModel());
    answer(res, ids, engineMax > 0 ? engineMax : t.tokenizer().modelMaxLength());
  }

  /** A /tokenize answer in vLLM's shape. */
  private static void answer(ServerResponse res, int[] ids, long max) throws IOException {
    ByteArrayOutputStream out = new ByteArrayOutputStream(16 + ids.length * 7);
    try (JsonGenerator gen = Json.FACTORY.createGenerator(out, JsonEncoding.UTF8)) {
      gen.writeStartObject();
      gen.writeNumberField("count", ids.length);
      gen.writeNumberField("max_model_len", max > 0 && max < Integer.MAX_VALUE ? max : 0);
      gen.writeArrayFieldStart("tokens");
      for (int id : ids) gen.writeNumber(Integer.toUnsignedLong(id));
      gen.writeEndArray();
      gen.writeNullField("token_strs");
      gen.writeEndObject();
      gen.writeRaw('\n');
    }
    res.header(HeaderNames.CONTENT_TYPE, JSON);
    res.send(out.toByteArray());
  }

  void detokenize(ServerRequest req, ServerResponse res) throws Exception {
    byte[] body = g.host.body(req);
    Detokenize d = parseDetokenize(body);
    ModelCatalog.Target t = g.target(d.model(), null);
    String text;
    if (t.tokenizer() == null) {
      String url = engineOf(t);
      if (speaksVllm(url)) {
        passToEngine(url, "/detokenize", body, res);
        return;
      }
      try {
        text = g.engineTokenizer(url, d.model()).detokenize(d.tokens());
      } catch (TokenizerException e) {
        throw g.engineTokenizeFailed(e);
      }
    } else {
      checkVocabulary(d.tokens(), t.tokenizer().vocabSize());
      text = t.tokenizer().decode(d.tokens(), false);
    }
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    try (JsonGenerator gen = Json.FACTORY.createGenerator(out, JsonEncoding.UTF8)) {
      gen.writeStartObject();
      gen.writeStringField("prompt", text);
      gen.writeEndObject();
      gen.writeRaw('\n');
    }
    res.header(HeaderNames.CONTENT_TYPE, JSON);
    res.send(out.toByteArray());
  }

  /**
   * Refuses ids at or past the tokenizer's vocabulary ({@code size}; -1: not known) as vLLM refuses
   * a prompt's ids: a 400 BadRequestError naming the largest.
   */
  static void checkVocabulary(int[] ids, int size) {
    if (size < 0) return;
    int max = -1;
    for (int id : ids) max = Math.max(max, id);
    if (max >= size) {
      throw OpenAiError.vllm(400, "BadRequestError", "Token id " + max + " is out of vocabulary");
    }
  }

  /** A /detokenize body: the model and the token ids. */
  private record Detokenize(String model, int[] tokens) {}

  private static Detokenize parseDetokenize(byte[] body) throws IOException {
    String model = null;
    int[] tokens = null;
    try (JsonParser p = Json.FACTORY.createParser(body)) {
      if (p.nextToken() != JsonToken.START_OBJECT) {
        throw OpenAiError.invalid(null, null, "expected a JSON object");
      }
      while (p.nextToken() == JsonToken.FIELD_NAME) {
        String f = p.currentName();
        JsonToken t = p.nextToken();
        if (f.equals("model") && t == JsonToken.VALUE_STRING) {
          model = p.getText();
        } else if (f.equals("tokens") && t == JsonToken.START_ARRAY) {
          int[] b = new int[64];
          int n = 0;
          while ((t = p.nextToken()) != JsonToken.END_ARRAY) {
            if (t != JsonToken.VALUE_NUMBER_INT) {
              throw OpenAiError.invalid(null, "tokens", "'tokens' must be integers");
            }
            // a token id is 0..2^31-1 (vLLM's and the tokenizers' int32): -1 or 2^32 would wrap
            if (p.getNumberType() == JsonParser.NumberType.BIG_INTEGER
                || p.getLongValue() < 0
                || p.getLongValue() > Integer.MAX_VALUE) {
              throw OpenAiError.invalid(
                  null,
                  "tokens",
                  "'tokens["
                      + n
                      + "]' is "
                      + OpenAiError.echo(p.getText())
                      + "; a token id is an integer in 0.."
                      + Integer.MAX_VALUE);
            }
            if (n == b.length) b = Arrays.copyOf(b, n * 2);
            b[n++] = (int) p.getLongValue();
          }
          tokens = Arrays.copyOf(b, n);
        } else {
          p.skipChildren();
        }
      }
    } catch (JsonProcessingException e) {
      throw OpenAiError.invalid(
          null,
          null,
          "We could not parse the JSON body of your request: " + e.getOriginalMessage());
    }
    if (model == null) {
      throw OpenAiError.invalid(null, "model", "you must provide a model parameter");
    }
    if (tokens == null)
      throw OpenAiError.invalid(null, "tokens", "'tokens' is a required property");
    return new Detokenize(model, tokens);
  }

  /** A usable engine of the model, or a 503. */
  private String engineOf(ModelCatalog.Target t) {
    String url = g.anyUsableEngine(g.host.model(t.baseModel(), null));
    if (url == null) {
      throw OpenAiError.unavailable(
          "no_engines", "no engine of model '" + t.baseModel() + "' can take the request now");
    }
    return url;
  }

  /**
   * Whether the engine at {@code url} takes vLLM's /tokenize and /detokenize bodies as they are
   * (vLLM, SGLang), learning its dialect first when not known yet.
   */
  private boolean speaksVllm(String url) {
    EngineApi a = g.engines.learn(url, g.host).join();
    return a != null && (a.dialect() == EngineDialect.VLLM || a.dialect() == EngineDialect.SGLANG);
  }

  /** Forwards a body unchanged to the engine at {@code url} and relays its whole answer. */
  private void passToEngine(String url, String path, byte[] body, ServerResponse res) {
    Supplier<HttpClientRequest> rq =
        () -> {
          HttpClientRequest q =
              g.client.post().uri(url + path).header(HeaderNames.CONTENT_TYPE, JSON);
          if (g.config.engineApiKey() != null) {
            q.header(HeaderNames.AUTHORIZATION, "Bearer " + g.config.engineApiKey());
          }
          return q;
        };
    OpenAiError tooLarge = null;
    try (HttpClientResponse up = g.submit(rq, body, path, url)) {
      // bounded: an engine's endless answer costs the bound, and closing the response before
      // the end of its body closes the connection
      byte[] answer = up.inputStream().readNBytes(EngineTokenizer.MAX_ANSWER_BYTES + 1);
      if (answer.length > EngineTokenizer.MAX_ANSWER_BYTES) {
        g.metrics.engineAnswersTooLarge.labelValues(path).inc();
        Gateway.LOG.warning(
            "engine " + url + " answered " + path + " with more than 32 MiB; refused");
        tooLarge =
            new OpenAiError(
                502,
                "server_error",
                Gateway.ANSWER_TOO_LARGE,
                null,
                "engine "
                    + url
                    + " answered "
                    + path
                    + " with more than "
                    + EngineTokenizer.MAX_ANSWER_BYTES
                    + " bytes; the gateway refuses it");
      } else {
        res.status(up.status());
        res.header(
            HeaderNames.CONTENT_TYPE, up.headers().first(HeaderNames.CONTENT_TYPE).orElse(JSON));
        res.send(answer);
      }
    } catch (IOException | RuntimeException e) {
      throw new OpenAiError(
          502,
          "server_error",
          "engine_unreachable",
          null,
          "engine " + url + " did not answer " + path + ": " + e.getMessage());
    }
    if (tooLarge != null) throw tooLarge;
  }
}
