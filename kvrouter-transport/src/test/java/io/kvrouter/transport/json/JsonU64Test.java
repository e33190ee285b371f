package io.kvrouter.transport.json;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import java.io.IOException;
import org.junit.jupiter.api.Test;

/** The shared u64 reader at and around the edges of its range. */
class JsonU64Test {
  private static final JsonFactory FACTORY = new JsonFactory();

  private static long read(String number) throws Exception {
    try (JsonParser p = FACTORY.createParser(number)) {
      p.nextToken();
      return JsonU64.read(p);
    }
  }

  @Test
  void acceptsUnsignedAndNegativeSignedValuesAsBits() throws Exception {
    assertThat(read("0")).isZero();
    assertThat(read("-0")).isZero();
    assertThat(read("42")).isEqualTo(42L);
    assertThat(read("9223372036854775807")).isEqualTo(Long.MAX_VALUE);
    assertThat(read("9223372036854775808")).isEqualTo(Long.MIN_VALUE);
    assertThat(read("18446744073709551615")).isEqualTo(-1L);
    assertThat(read("18446744073709551610")).isEqualTo(-6L);
    assertThat(read("-1")).isEqualTo(-1L);
    assertThat(read("-9223372036854775808")).isEqualTo(Long.MIN_VALUE);
  }

  @Test
  void rejectsEverythingOutsideTheRange() {
    for (String s :
        new String[] {
          "18446744073709551616",
          "18446744073709551620",
          "99999999999999999999",
          "184467440737095516150",
          "-9223372036854775809",
          "-18446744073709551615",
          "1" + "0".repeat(200)
        }) {
      assertThatThrownBy(() -> read(s))
          .as(s)
          .isInstanceOf(JsonU64.OutOfRangeException.class)
          .hasMessageContaining(JsonU64.RANGE);
    }
  }

  @Test
  void refusesATokenThatIsNotAnInteger() throws IOException {
    try (JsonParser p = FACTORY.createParser("1.5")) {
      p.nextToken();
      assertThatThrownBy(() -> JsonU64.read(p)).isInstanceOf(IllegalStateException.class);
    }
  }
}
