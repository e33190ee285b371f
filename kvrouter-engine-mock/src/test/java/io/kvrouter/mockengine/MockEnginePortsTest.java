package io.kvrouter.mockengine;

import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import org.junit.jupiter.api.Test;

/** A port that is taken is one clear error naming it, for the HTTP port and the ZMQ ones. */
class MockEnginePortsTest {
  @Test
  void aTakenHttpPortIsOneClearError() throws IOException {
    try (ServerSocket taken = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      int port = taken.getLocalPort();
      assertThatThrownBy(
              () ->
                  MockEngineServer.start(
                      MockEngineServer.Config.builder()
                          .host("127.0.0.1")
                          .port(port)
                          .modelDir(MockEngines.tinyModel())
                          .build()))
          .isInstanceOf(IllegalStateException.class)
          .hasMessageStartingWith("mock engine: cannot listen on 127.0.0.1:" + port + ": ")
          .hasMessageContaining("another process has the port");
    }
  }

  @Test
  void aTakenZmqPortIsOneClearError() throws IOException {
    try (ServerSocket taken = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      String endpoint = "tcp://127.0.0.1:" + taken.getLocalPort();
      assertThatThrownBy(
              () ->
                  MockEngineServer.start(
                      MockEngineServer.Config.builder()
                          .port(0)
                          .modelDir(MockEngines.tinyModel())
                          .kvEvents(KvEventsConfig.zmq(endpoint, "tcp://127.0.0.1:*"))
                          .build()))
          .isInstanceOf(IllegalStateException.class)
          .hasMessageContaining("cannot bind the KV event sockets " + endpoint)
          .hasMessageContaining("address already in use");
    }
  }
}
