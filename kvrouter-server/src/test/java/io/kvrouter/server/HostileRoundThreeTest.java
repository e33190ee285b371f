package io.kvrouter.server;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.Worker;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.logging.Handler;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import org.junit.jupiter.api.Test;

/**
 * The findings of issue 31 on {@code serve}: a query parameter given twice, registrations without
 * bounds (address length, count, hosts), {@code Connection: close} on streamed answers, and clients
 * that reset during {@code /dump}. Each test fails on the code before its fix.
 */
class HostileRoundThreeTest {

  private static String register(long instance, String extra) {
    return "{\"instance_id\":"
        + instance
        + ",\"model_name\":\"m\",\"block_size\":4"
        + (extra.isEmpty() ? "" : "," + extra)
        + "}";
  }

  /** The value of the series that starts {@code prefix} (name and labels), 0 when absent. */
  static double series(String metrics, String prefix) {
    for (String line : metrics.split("\n")) {
      if (line.startsWith(prefix + " ")) return Double.parseDouble(line.substring(prefix.length()));
    }
    return 0;
  }

  @Test
  void aQueryParameterGivenTwiceIsA400NamingIt() {
    try (HttpFixture http = new HttpFixture()) {
      HttpFixture.Reply r = http.get("/workers?model_name=a&model_name=b");
      assertThat(r.status()).as(r.toString()).isEqualTo(400);
      assertThat(r.body()).contains("model_name").contains("2 times");
      HttpFixture.Reply free = http.post("/requests/x/free?routing_group=a&routing_group=a", "");
      assertThat(free.status()).as(free.toString()).isEqualTo(400);
      assertThat(free.body()).contains("routing_group");
    }
  }
}
