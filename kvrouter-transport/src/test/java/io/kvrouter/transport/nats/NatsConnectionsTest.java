package io.kvrouter.transport.nats;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.net.ServerSocket;
import org.junit.jupiter.api.Test;

class NatsConnectionsTest {

  @Test
  void acceptsNatsAndTlsUrlsAloneOrSeparatedByCommas() {
    assertThat(NatsConnections.checkUrl("events", " nats://127.0.0.1:4222 "))
        .isEqualTo("nats://127.0.0.1:4222");
    assertThat(NatsConnections.checkUrl("events", "nats://a:4222, tls://b:4223"))
        .isEqualTo("nats://a:4222, tls://b:4223");
  }

  @Test
  void refusesAnythingElseNamingTheOptionAndTheValue() {
    for (String bad :
        new String[] {"127.0.0.1:4222", "http://a:1", "nats://", "nats://a:1,x", ""}) {
      assertThatThrownBy(() -> NatsConnections.checkUrl("--events", bad))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessage(
              "--events: '"
                  + bad
                  + "' is not a NATS server URL; expected nats://host:port (e.g."
                  + " nats://127.0.0.1:4222)");
    }
  }

  @Test
  void aServerThatIsNotThereIsAClearError() throws Exception {
    int port;
    try (ServerSocket s = new ServerSocket(0)) {
      port = s.getLocalPort(); // free once closed: nobody listens there
    }
    String url = "nats://127.0.0.1:" + port;
    assertThatThrownBy(() -> NatsConnections.connect("events", url, "test"))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageStartingWith("events: cannot connect to NATS at " + url + ": ")
        .hasMessageEndingWith("(is nats-server running there with JetStream, -js?)");
  }
}
