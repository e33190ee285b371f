package io.kvrouter.harness;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.server.KvRouterServer;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Path;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * The serve load against a server in this JVM, events only ({@code --wrk-connections 0}, so no
 * wrk): the preload indexes exactly the blocks it stored, the store/remove batch pairs leave the
 * index as it was, and every event posted is one the server counted. Rates are never asserted.
 */
class ServeLoadTest {
  private static long number(String text, String regex) {
    Matcher m = Pattern.compile(regex).matcher(text);
    assertThat(m.find()).as(regex + " in\n" + text).isTrue();
    return Long.parseLong(m.group(1).replace(",", ""));
  }

  @Test
  void theEventPairsLeaveTheIndexAsThePreloadLeftIt() throws Exception {
    StringWriter out = new StringWriter();
    StringWriter err = new StringWriter();
    try (KvRouterServer server =
        KvRouterServer.start(KvRouterServer.Config.builder().port(0).build())) {
      // 2 workers, each caching all 4 pool prompts of 1,024 tokens (64 blocks of 16); the 4
      // prompts start with 4 different system prompts, so they share no block
      ServeLoad.Settings s =
          new ServeLoad.Settings(
              server.url(), 2, 4, 1024, 4, 2000, 100, 1, 1, 0, 1, 0, Path.of("unused.lua"), 7, -1);
      int code = new ServeLoad(s).run(new PrintWriter(out, true), new PrintWriter(err, true));
      assertThat(code).isZero();
    }
    String text = out.toString();
    assertThat(err.toString()).isEmpty();
    long pairs = 2 * 4 * 64;
    assertThat(number(text, "preload: 2 workers, 8 stored events, ([0-9,]+) \\(worker, block\\)"))
        .isEqualTo(pairs);
    assertThat(number(text, "index: ([0-9,]+) \\(worker, block\\) pairs before")).isEqualTo(pairs);
    assertThat(number(text, "pairs before, ([0-9,]+) after")).isEqualTo(pairs);
    long posted = number(text, "events: ([0-9,]+) posted and acknowledged");
    assertThat(posted % 200).as("whole pairs of batches of 100 events").isZero();
    assertThat(number(text, "server counted ([0-9,]+);")).isEqualTo(posted);
    assertThat(number(text, "failed batches ([0-9]+)")).isZero();
    assertThat(text).doesNotContain("server CPU").doesNotContain("queries:");
  }
}
