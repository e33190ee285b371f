package io.kvrouter.sim.trace;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.hash.BlockHasher;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/** {@link TraceTokens}: requests share exactly the token prefix their hash ids share. */
class TraceTokensTest {

  private static TraceRequest req(int inputLength, long... ids) {
    return new TraceRequest(1, 0, inputLength, 1, ids);
  }

  @Test
  void sharedIdsGiveASharedPrefixAndNothingMore() {
    int[] a = TraceTokens.tokens(req(4 * 512, 0, 7, 8, 9));
    int[] b = TraceTokens.tokens(req(3 * 512 + 100, 0, 7, 8, 10));
    assertThat(a).hasSize(2048);
    assertThat(b).hasSize(1636);
    assertThat(Arrays.mismatch(a, b)).isEqualTo(3 * 512);
    // the same ids in another request expand to the same tokens, cut at its input length
    int[] c = TraceTokens.tokens(req(2 * 512 + 1, 0, 7, 8));
    assertThat(Arrays.copyOf(a, c.length)).isEqualTo(c);
    // a block's tokens depend on its id, not on its position or predecessors
    int[] d = TraceTokens.tokens(req(512, 8));
    assertThat(Arrays.copyOfRange(a, 1024, 1536)).isEqualTo(d);
    // tokens within one block differ (unlike 512 copies of the id)
    assertThat(Arrays.stream(d).distinct().count()).isEqualTo(512);
  }

  @Test
  void reblocksAt64And16() {
    int[] a = TraceTokens.tokens(req(3 * 512, 0, 1, 2));
    int[] b = TraceTokens.tokens(req(3 * 512, 0, 1, 3));
    for (int bs : new int[] {64, 16}) {
      long[] ha = BlockHasher.of(bs).localHashes(a);
      long[] hb = BlockHasher.of(bs).localHashes(b);
      assertThat(ha).hasSize(3 * 512 / bs);
      int shared = 2 * 512 / bs;
      assertThat(Arrays.mismatch(ha, hb)).isEqualTo(shared);
      for (int i = shared; i < ha.length; i++) assertThat(ha[i]).isNotEqualTo(hb[i]);
    }
    // block sizes that do not divide 512 share the blocks lying wholly in shared ids
    long[] ha = BlockHasher.of(100).localHashes(a);
    long[] hb = BlockHasher.of(100).localHashes(b);
    assertThat(Arrays.mismatch(ha, hb)).isEqualTo(10); // blocks 0..9 end at token 1000 <= 1024
  }

  @Test
  void isAPureFunction() {
    assertThat(TraceTokens.token(12345, 17)).isEqualTo(TraceTokens.token(12345, 17));
    assertThat(TraceTokens.token(12345, 17)).isNotEqualTo(TraceTokens.token(12346, 17));
  }

  @Test
  void everyTokenIsTheFinaliserOfItsIdAndPosition() {
    // values of SplitMix64's finaliser on h * 512 + t, computed outside Java
    assertThat(TraceTokens.token(0, 0)).isEqualTo(2065550767);
    assertThat(TraceTokens.token(7, 511)).isEqualTo(206441731);
    assertThat(TraceTokens.token(123456789, 300)).isEqualTo(875690195);
    // tokens() expands block by block: every token equals token(id, position), across block
    // boundaries and in a partial last block
    long[] ids = {123456789, 0, 7, -5, 42};
    int[] t = TraceTokens.tokens(req(4 * 512 + 301, ids));
    assertThat(t).hasSize(2349);
    assertThat(t[300]).isEqualTo(875690195);
    assertThat(t[512]).isEqualTo(2065550767);
    assertThat(t[2 * 512 + 511]).isEqualTo(206441731);
    assertThat(t[3 * 512 + 1]).isEqualTo(-933186052);
    for (int i = 0; i < t.length; i++) {
      assertThat(t[i]).as("token %d", i).isEqualTo(TraceTokens.token(ids[i / 512], i % 512));
    }
  }
}
