package io.kvrouter.gateway;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

class SseBufferTest {
  private static byte[] ascii(String s) {
    return s.getBytes(StandardCharsets.US_ASCII);
  }

  @Test
  void anEventWithoutItsEndIsRefusedAtTheBoundAndTheArrayStaysWithinIt() {
    SseBuffer b = new SseBuffer(64 * 1024);
    byte[] piece = new byte[1000];
    Arrays.fill(piece, (byte) 'x');
    assertThat(b.append(ascii("data: "), 6)).isTrue();
    int appended = 0;
    while (b.append(piece, piece.length)) {
      appended++;
      assertThat(b.hasEvent()).isFalse();
    }
    assertThat(appended).isEqualTo(65); // 6 + 65,000 bytes held; one more piece would pass 64 KiB
    assertThat(b.size()).isEqualTo(65_006);
    assertThat(b.capacity()).isLessThanOrEqualTo(64 * 1024);
  }

  @Test
  void eventsSplitAcrossPiecesAndDelimitersAreFoundOnceEach() {
    SseBuffer b = new SseBuffer(1024);
    String stream = "data: a\n\ndata: bb\r\n\r\ndata: c";
    int found = 0;
    StringBuilder seen = new StringBuilder();
    for (int i = 0; i < stream.length(); i++) {
      assertThat(b.append(ascii(stream.substring(i, i + 1)), 1)).isTrue();
      int end;
      while (b.hasEvent() && (end = b.nextEventEnd()) >= 0) {
        seen.append(new String(b.array(), b.start(), end - b.start(), StandardCharsets.US_ASCII));
        b.consume(end);
        found++;
      }
    }
    assertThat(found).isEqualTo(2);
    assertThat(seen.toString()).isEqualTo("data: a\n\ndata: bb\r\n\r\n");
    assertThat(b.size()).isEqualTo("data: c".length());
  }
}
