package io.kvrouter.server.http;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.Charset;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/** The strict UTF-8 check against the JDK's own strict decoder, and the issue's byte sequences. */
class Utf8Test {
  @Test
  void theIssuesSequencesAreRefusedWithTheirOffset() {
    assertThat(Utf8.check(bytes(0x41, 0xc0, 0xaf), 3))
        .contains("byte 0xC0 at offset 1")
        .contains("overlong");
    assertThat(Utf8.check(bytes(0x41, 0x42, 0xed, 0xa0, 0x80), 5))
        .contains("offset 2")
        .contains("surrogate");
    assertThat(Utf8.check(bytes(0xf4, 0x90, 0x80, 0x80), 4)).contains("beyond U+10FFFF");
    assertThat(Utf8.check(bytes(0xe2, 0x82), 2)).contains("offset 0").contains("ends inside");
    assertThat(Utf8.check("é€😀 and ASCII".getBytes(StandardCharsets.UTF_8), 17)).isNull();
  }

  /** A NUL is well-formed UTF-8 but never in JSON: it is how UTF-16 and UTF-32 bodies show. */
  @Test
  void aNulIsRefusedSoUtf16AndUtf32BodiesAre() {
    assertThat(Utf8.check(bytes(0x7b, 0x00, 0x7d), 3)).contains("offset 1").contains("NUL");
    byte[] utf16 = "{\"a\":1}".getBytes(StandardCharsets.UTF_16LE);
    assertThat(Utf8.check(utf16, utf16.length)).contains("offset 1").contains("UTF-16");
    byte[] utf32 = "{}".getBytes(Charset.forName("UTF-32BE"));
    assertThat(Utf8.check(utf32, utf32.length)).contains("offset 0");
  }

  /** Random byte strings, biased towards the edges of the UTF-8 table: same verdict as the JDK. */
  @Test
  void agreesWithTheJdksStrictDecoderOnRandomBytes() {
    long seed = System.nanoTime();
    SplittableRandom r = new SplittableRandom(seed);
    int[] interesting = {
      0x00, 0x41, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1, 0xc2, 0xdf, 0xe0, 0xe1,
      0xec, 0xed, 0xee, 0xef, 0xf0, 0xf1, 0xf3, 0xf4, 0xf5, 0xff
    };
    int malformed = 0;
    for (int i = 0; i < 200_000; i++) {
      byte[] b = new byte[1 + r.nextInt(6)];
      for (int k = 0; k < b.length; k++) {
        b[k] =
            (byte)
                (r.nextInt(3) == 0 ? r.nextInt(256) : interesting[r.nextInt(interesting.length)]);
      }
      // the JDK's verdict, and no NUL (well-formed UTF-8, refused as no JSON text holds it raw)
      boolean jdk = jdkAccepts(b) && !hasNul(b);
      String ours = Utf8.check(b, b.length);
      if (!jdk) malformed++;
      assertThat(ours == null).as("seed %d, bytes %s: ours %s", seed, hex(b), ours).isEqualTo(jdk);
    }
    // both verdicts occurred (the phase is not one-sided)
    assertThat(malformed).isBetween(1000, 199_000);
  }

  private static boolean hasNul(byte[] b) {
    for (byte x : b) if (x == 0) return true;
    return false;
  }

  private static boolean jdkAccepts(byte[] b) {
    CharsetDecoder d =
        StandardCharsets.UTF_8
            .newDecoder()
            .onMalformedInput(CodingErrorAction.REPORT)
            .onUnmappableCharacter(CodingErrorAction.REPORT);
    try {
      d.decode(ByteBuffer.wrap(b));
      return true;
    } catch (CharacterCodingException e) {
      return false;
    }
  }

  private static byte[] bytes(int... v) {
    byte[] b = new byte[v.length];
    for (int i = 0; i < v.length; i++) b[i] = (byte) v[i];
    return b;
  }

  private static String hex(byte[] b) {
    StringBuilder sb = new StringBuilder();
    for (byte x : b) sb.append(String.format("%02x ", x & 0xff));
    return sb.toString().trim();
  }
}
