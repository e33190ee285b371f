package io.kvrouter.transport.kvevents;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.hash.SequenceHasher;
import io.kvrouter.index.KvCacheGroup;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The converter and a hybrid model's KV cache groups (docs/routing.md, "Hybrid models"): the main
 * group's events stay the main path, every other group's become {@link GroupEvent}s naming their
 * positions by §2 sequence hashes (expected values below come from {@link BlockHasher} and {@link
 * SequenceHasher}, not from the converter), and a model without groups converts as before.
 */
class EngineEventConverterGroupsTest {
  private static final BlockHasher H = BlockHasher.of(4);
  private static final int[] T12 = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  private static final int[] T16 = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  private static final long[] LOCAL = H.localHashes(T16);
  private static final long[] SEQ = SequenceHasher.sequenceHashes(LOCAL);

  private static KvEventBatch batch(Integer dpRank, EngineEvent... events) {
    return new KvEventBatch(1.0, dpRank, List.of(events), 0);
  }

  private static EngineEvent.BlockStored store(
      long[] hashes, Long parent, int[] tokens, int bs, Integer group, String kind, Integer w) {
    return new EngineEvent.BlockStored(
        hashes,
        parent != null,
        parent == null ? 0 : parent,
        tokens,
        bs,
        null,
        "GPU",
        null,
        null,
        group,
        kind,
        w,
        null);
  }

  private static EngineEvent.BlockRemoved removal(Integer group, long... hashes) {
    return new EngineEvent.BlockRemoved(hashes, "GPU", group, null);
  }

  private static List<CacheEvent> data(ConvertedBatch c) {
    List<CacheEvent> out = new ArrayList<>();
    for (TieredEvent e : c.events()) out.add(e.event().data());
    return out;
  }

  private static long[] at(long[] a, int... positions) {
    long[] out = new long[positions.length];
    for (int i = 0; i < positions.length; i++) out[i] = a[positions[i]];
    return out;
  }

  @Test
  void aHybridStreamBecomesMainEventsAndGroupEventsInPositions() {
    EngineEventConverter c = new EngineEventConverter(7, 0, 4, H);
    int[] t12 = T12;
    ConvertedBatch a =
        c.convert(
            batch(
                0,
                store(new long[] {100, 101, 102}, null, t12, 4, 0, "full_attention", null),
                store(new long[] {100, 101, 102}, null, t12, 4, 1, "sliding_window", 8),
                // a Mamba store names only its last state; its tokens cover the whole range
                store(new long[] {102}, null, t12, 4, 2, "mamba", null)));
    assertThat(data(a))
        .containsExactly(
            CacheEvent.storedAtRoot(new long[] {100, 101, 102}, Arrays.copyOf(LOCAL, 3)));
    assertThat(a.groupEvents()).hasSize(2);
    GroupEvent sw = a.groupEvents().get(0);
    assertThat(sw.groupIdx()).isEqualTo(1);
    assertThat(sw.group()).isEqualTo(KvCacheGroup.slidingWindow(8));
    assertThat(sw.event().worker()).isEqualTo(new Worker(7, 0));
    assertThat(sw.event().data())
        .isEqualTo(CacheEvent.storedAtRoot(at(SEQ, 0, 1, 2), at(LOCAL, 0, 1, 2)));
    GroupEvent state = a.groupEvents().get(1);
    assertThat(state.groupIdx()).isEqualTo(2);
    assertThat(state.group()).isEqualTo(KvCacheGroup.state());
    assertThat(state.event().data()).isEqualTo(CacheEvent.storedAtRoot(at(SEQ, 2), at(LOCAL, 2)));
    assertThat(c.mainGroup()).isZero();

    ConvertedBatch b =
        c.convert(
            batch(
                0,
                store(
                    new long[] {103},
                    102L,
                    Arrays.copyOfRange(T16, 12, 16),
                    4,
                    1,
                    "sliding_window",
                    8),
                // the state group does not hold 999: its chain cannot be placed
                store(new long[] {104}, 999L, Arrays.copyOfRange(T16, 12, 16), 4, 2, "mamba", null),
                removal(1, 100, 555),
                removal(2, 102),
                removal(0, 100)));
    assertThat(b.ignoredEvents()).isEqualTo(1);
    assertThat(data(b)).containsExactly(CacheEvent.removed(100));
    assertThat(b.groupEvents())
        .extracting(g -> g.groupIdx() + " " + g.event().data())
        .containsExactly(
            "1 " + CacheEvent.storedAtRoot(at(SEQ, 3), at(LOCAL, 3)),
            "1 " + CacheEvent.removed(SEQ[0]),
            "2 " + CacheEvent.removed(SEQ[2]));

    ConvertedBatch cleared = c.convert(batch(0, new EngineEvent.AllBlocksCleared()));
    assertThat(data(cleared)).containsExactly(CacheEvent.cleared());
    assertThat(cleared.groupEvents())
        .extracting(g -> g.groupIdx() + " " + g.group() + " " + g.event().data())
        .containsExactly("1 sliding:8 " + CacheEvent.cleared(), "2 state " + CacheEvent.cleared());

    // the clear dropped what the group held: a continuation of 103 can no longer be placed
    ConvertedBatch after =
        c.convert(
            batch(
                0,
                store(
                    new long[] {105},
                    103L,
                    Arrays.copyOfRange(T16, 12, 16),
                    4,
                    1,
                    "sliding_window",
                    8)));
    assertThat(after.groupEvents()).isEmpty();
    assertThat(after.ignoredEvents()).isEqualTo(1);
    assertThat(c.groupKinds())
        .containsEntry(1, KvCacheGroup.slidingWindow(8))
        .containsEntry(2, KvCacheGroup.state())
        .hasSize(2);
  }

  @Test
  void aModelWithoutGroupsConvertsAsBefore() {
    EngineEventConverter plain = new EngineEventConverter(1, 0, 4, H);
    EngineEventConverter tagged = new EngineEventConverter(1, 0, 4, H);
    ConvertedBatch p =
        plain.convert(
            batch(
                0, store(new long[] {1, 2, 3}, null, T12, 4, null, null, null), removal(null, 2)));
    ConvertedBatch t =
        tagged.convert(
            batch(
                0,
                store(new long[] {1, 2, 3}, null, T12, 4, 0, "full_attention", null),
                removal(0, 2)));
    List<CacheEvent> expected =
        List.of(
            CacheEvent.storedAtRoot(new long[] {1, 2, 3}, Arrays.copyOf(LOCAL, 3)),
            CacheEvent.removed(2));
    assertThat(data(p)).isEqualTo(expected);
    assertThat(data(t)).isEqualTo(expected);
    assertThat(p.groupEvents()).isEmpty();
    assertThat(t.groupEvents()).isEmpty();
    assertThat(p.groupProblem()).isNull();
    assertThat(t.groupProblem()).isNull();
    assertThat(tagged.groupKinds()).isEmpty();
  }

  @Test
  void aGroupWithOtherBlocksOrAnUnpublishedWindowIsLeftOutWithAReason() {
    EngineEventConverter c = new EngineEventConverter(1, 0, 4, H);
    ConvertedBatch other =
        c.convert(
            batch(
                0,
                store(new long[] {1, 2, 3}, null, T12, 4, 0, "full_attention", null),
                store(new long[] {1}, null, Arrays.copyOf(T16, 8), 8, 1, "sliding_window", 8)));
    assertThat(other.refusedEvents()).isEqualTo(1);
    assertThat(other.groupEvents()).isEmpty();
    assertThat(other.groupProblem()).contains("blocks of 8 tokens").contains("one block size");

    ConvertedBatch chunked =
        c.convert(
            batch(
                0,
                store(
                    new long[] {1},
                    null,
                    Arrays.copyOf(T16, 4),
                    4,
                    2,
                    "chunked_local_attention",
                    null)));
    assertThat(chunked.ignoredEvents()).isEqualTo(1);
    assertThat(chunked.groupProblem()).contains("chunked_local_attention").contains("chunk size");

    EngineEventConverter split = new EngineEventConverter(1, 0, 8, BlockHasher.of(4));
    ConvertedBatch s =
        split.convert(
            batch(
                0,
                store(new long[] {1}, null, Arrays.copyOf(T16, 8), 8, 0, "full_attention", null),
                store(new long[] {1}, null, Arrays.copyOf(T16, 8), 8, 1, "mamba", null)));
    assertThat(s.refusedEvents()).isEqualTo(1);
    assertThat(s.events()).hasSize(1); // the main group still converts, split in two
    assertThat(s.groupProblem()).contains("router's block size equal to the engine's");
  }

  @Test
  void aSecondFullAttentionGroupIsAGroupOfItsOwn() {
    EngineEventConverter c = new EngineEventConverter(1, 0, 4, H);
    ConvertedBatch out =
        c.convert(
            batch(
                0,
                store(new long[] {5, 6}, null, Arrays.copyOf(T16, 8), 4, 0, "sliding_window", 4),
                store(new long[] {5, 6}, null, Arrays.copyOf(T16, 8), 4, 1, "full_attention", null),
                store(new long[] {5, 6}, null, Arrays.copyOf(T16, 8), 4, 2, "mla_attention", null),
                removal(0, 5),
                removal(1, 6)));
    assertThat(c.mainGroup()).isEqualTo(1);
    assertThat(data(out))
        .containsExactly(
            CacheEvent.storedAtRoot(new long[] {5, 6}, Arrays.copyOf(LOCAL, 2)),
            CacheEvent.removed(6));
    assertThat(out.groupEvents())
        .extracting(g -> g.groupIdx() + " " + g.group() + " " + g.event().data())
        .containsExactly(
            "0 sliding:4 " + CacheEvent.storedAtRoot(at(SEQ, 0, 1), at(LOCAL, 0, 1)),
            "2 full " + CacheEvent.storedAtRoot(at(SEQ, 0, 1), at(LOCAL, 0, 1)),
            "0 sliding:4 " + CacheEvent.removed(SEQ[0]));
  }
}
