package io.kvrouter.gateway;

import static io.kvrouter.gateway.GatewayEngineAnswersTest.chunked;
import static io.kvrouter.gateway.GatewayStubTest.BS;
import static io.kvrouter.gateway.GatewayStubTest.events;
import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.server.KvRouterServer;
import io.kvrouter.server.ServerHost.Registration;
import io.kvrouter.tokenize.EngineTokenizer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Engine answers the gateway reads whole (its probe of a registered engine, a {@code /tokenize}
 * passed to a vLLM engine, an engine's tokenization) are read up to {@link
 * EngineTokenizer#MAX_ANSWER_BYTES}: an engine that sends 64 MiB is refused with a 502 in OpenAI's
 * shape, counted, and its connection closed (issue 31, hostile engines).
 */
class GatewayEngineAnswerBoundsTest {
  private static final HttpClient HTTP =
      HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
  private static final long HUGE = 64L << 20;
  private final List<AutoCloseable> open = new ArrayList<>();

  @AfterEach
  void close() throws Exception {
    for (int i = open.size() - 1; i >= 0; i--) open.get(i).close();
  }

  private Gateway gateway() throws Exception {
    Gateway g =
        Gateway.start(
            KvRouterServer.Config.builder().port(0).maxBodyBytes(1 << 20).build(),
            GatewayConfig.builder().model("eng", null).maxAttempts(1).build());
    open.add(g);
    return g;
  }

  /** An engine answering {@code POST /tokenize}: the probe's with {@code probe}, others endless. */
  private RawEngine engine(boolean probeEndless) throws IOException {
    RawEngine e =
        new RawEngine(
            (head, body, out) -> {
              if (body.contains("Hello") && !probeEndless) {
                byte[] ok =
                    "{\"count\":1,\"max_model_len\":64,\"tokens\":[9]}"
                        .getBytes(StandardCharsets.US_ASCII);
                out.write(
                    ("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                            + ok.length
                            + "\r\nConnection: close\r\n\r\n")
                        .getBytes(StandardCharsets.US_ASCII));
                out.write(ok);
                return;
              }
              endless(out);
            },
            head -> head.startsWith("POST /tokenize ") || head.startsWith("POST /detokenize "));
    open.add(e);
    return e;
  }

  /** A 200 whose JSON body is 64 MiB long: {"count":1,"tokens":[1,1,1,... */
  private static void endless(OutputStream out) throws IOException {
    out.write(
        ("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
                + "Connection: close\r\n\r\n")
            .getBytes(StandardCharsets.US_ASCII));
    chunked(out, "{\"count\":1,\"tokens\":[".getBytes(StandardCharsets.US_ASCII));
    byte[] block = new byte[1 << 20];
    for (int i = 0; i < block.length; i += 2) {
      block[i] = '1';
      block[i + 1] = ',';
    }
    for (long n = 0; n < HUGE; n += block.length) chunked(out, block);
  }

  private static HttpResponse<String> post(Gateway g, String path, String body) throws Exception {
    return HTTP.send(
        HttpRequest.newBuilder(URI.create(g.url() + path))
            .header("Content-Type", "application/json")
            .timeout(Duration.ofSeconds(90)) // a deadline for a loaded machine, not a measure
            .POST(HttpRequest.BodyPublishers.ofString(body))
            .build(),
        HttpResponse.BodyHandlers.ofString());
  }

  private static double tooLarge(Gateway g, String path) {
    return g.metrics.engineAnswersTooLarge.labelValues(path).get();
  }

  private static void assertRefused(HttpResponse<String> r, String path) {
    assertThat(r.statusCode()).as(r.body()).isEqualTo(502);
    assertThat(r.body())
        .startsWith("{\"error\":{")
        .contains("\"code\":\"engine_answer_too_large\"")
        .contains(path)
        .contains(Integer.toString(EngineTokenizer.MAX_ANSWER_BYTES));
    assertThat(r.body().length()).isLessThan(2_000);
  }

  /** A vLLM engine's endless /tokenize and /detokenize answers, passed through before. */
  @Test
  void anEndlessTokenizeAnswerOfAVllmEngineIsA502AndItsConnectionIsClosed() throws Exception {
    Gateway g = gateway();
    RawEngine e = engine(false);
    g.host.register(events(Registration.of("eng", BS, 1, 0, e.url())));
    HttpResponse<String> r = post(g, "/tokenize", "{\"model\":\"eng\",\"prompt\":\"a b c\"}");
    assertRefused(r, "/tokenize");
    GatewayStubTest.await("the engine's connection closed", () -> e.writing.get() == 0);
    assertThat(e.largestAnswer.get()).isLessThan(EngineTokenizer.MAX_ANSWER_BYTES + (16L << 20));
    assertThat(tooLarge(g, "/tokenize")).isEqualTo(1);

    HttpResponse<String> d = post(g, "/detokenize", "{\"model\":\"eng\",\"tokens\":[1,2]}");
    assertRefused(d, "/detokenize");
    GatewayStubTest.await("the engine's connection closed", () -> e.writing.get() == 0);
    assertThat(e.largestAnswer.get()).isLessThan(EngineTokenizer.MAX_ANSWER_BYTES + (16L << 20));
    assertThat(tooLarge(g, "/detokenize")).isEqualTo(1);
    System.out.printf(
        "endless /tokenize, /detokenize: at most %,d bytes written on one connection%n",
        e.largestAnswer.get());
  }

  /**
   * The registration's probe (its {@code POST /tokenize}, for an engine that names no dialect) read
   * the whole answer; now it is refused and counted, and so is the engine's tokenization a request
   * then asks of it.
   */
  @Test
  void anEndlessAnswerToTheRegistrationsProbeIsRefusedAndCounted() throws Exception {
    Gateway g = gateway();
    RawEngine e = engine(true);
    g.host.register(events(Registration.of("eng", BS, 1, 0, e.url())));
    GatewayStubTest.await("the probe's answer refused", () -> tooLarge(g, "/tokenize") >= 1);
    GatewayStubTest.await("the engine's connection closed", () -> e.writing.get() == 0);
    assertThat(e.largestAnswer.get()).isLessThan(EngineTokenizer.MAX_ANSWER_BYTES + (16L << 20));
    assertThat(g.engines.api(e.url())).as("the engine was not learnt").isNull();

    byte[] prompt = new byte[100];
    Arrays.fill(prompt, (byte) 'a');
    HttpResponse<String> r =
        post(
            g,
            "/v1/completions",
            "{\"model\":\"eng\",\"prompt\":\""
                + new String(prompt, StandardCharsets.US_ASCII)
                + "\",\"max_tokens\":1}");
    assertRefused(r, "/tokenize");
    GatewayStubTest.await("the engine's connections closed", () -> e.writing.get() == 0);
    assertThat(e.largestAnswer.get()).isLessThan(EngineTokenizer.MAX_ANSWER_BYTES + (16L << 20));
    System.out.printf(
        "endless probe answers: at most %,d bytes written on one connection%n",
        e.largestAnswer.get());
  }
}
