package io.kvrouter.transport;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/** The one token id check: 0..2^32-1 as the wire gave it, before it becomes int bits. */
class TokenIdsTest {

  @Test
  void exactlyTheUnsigned32BitValuesAreTokenIds() {
    assertThat(TokenIds.isValid(0)).isTrue();
    assertThat(TokenIds.isValid(151_645)).isTrue();
    assertThat(TokenIds.isValid(4_294_967_295L)).isTrue();
    assertThat(TokenIds.isValid(-1)).as("the same int bits as 2^32-1, but negative").isFalse();
    assertThat(TokenIds.isValid(Integer.MIN_VALUE)).isFalse();
    assertThat(TokenIds.isValid(4_294_967_296L)).isFalse();
    assertThat(TokenIds.isValid(Long.MAX_VALUE)).isFalse();
    assertThat(TokenIds.isValid(Long.MIN_VALUE)).as("a uint64 of 2^63, as its bits").isFalse();
  }

  @Test
  void aRejectedIdIsNamedAsTheInputWroteIt() {
    assertThat(TokenIds.outOfRange("-1")).isEqualTo("token id -1 is outside 0..4294967295");
  }
}
