package io.kvrouter.transport.kvevents;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.hash.SequenceHasher;
import io.kvrouter.index.KvIndex;
import io.kvrouter.index.KvIndexes;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class EngineEventConverterTest {
  private static final int[] T8 = {1, 2, 3, 4, 5, 6, 7, 8};

  private static KvEventBatch batch(Integer dpRank, EngineEvent... events) {
    return new KvEventBatch(1.0, dpRank, List.of(events), 0);
  }

  private static List<CacheEvent> data(ConvertedBatch c) {
    List<CacheEvent> out = new ArrayList<>();
    for (TieredEvent e : c.events()) out.add(e.event().data());
    return out;
  }

  private static EngineEvent.BlockStored stored(
      long[] hashes,
      Long parent,
      int[] tokens,
      int bs,
      String lora,
      Long loraId,
      List<List<Object>> extra) {
    return new EngineEvent.BlockStored(
        hashes,
        parent != null,
        parent == null ? 0 : parent,
        tokens,
        bs,
        loraId,
        null,
        lora,
        extra,
        null,
        null,
        null);
  }

  // ------------------------------------------------------------------ registration

  @ParameterizedTest
  @CsvSource({"24, 16", "8, 16", "6, 4"})
  void anEngineBlockSizeThatIsNoMultipleIsRefusedWithAClearError(int engine, int router) {
    assertThatThrownBy(() -> new EngineEventConverter(1, 0, engine, BlockHasher.of(router)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining(
            "engine block size " + engine + " is not a multiple of the router block size " + router)
        .hasMessageContaining("run the router with a block size that divides " + engine);
  }

  @Test
  void multiplesAreAccepted() {
    assertThat(new EngineEventConverter(1, 0, 32, BlockHasher.of(16)).engineBlockSize())
        .isEqualTo(32);
    assertThat(new EngineEventConverter(1, 0, 16, BlockHasher.of(16)).engineBlockSize())
        .isEqualTo(16);
  }

  // ------------------------------------------------------------------ equal block sizes

  @Test
  void engineHashesBecomeSequenceHashesAndLocalHashesAreRecomputed() {
    EngineEventConverter c = new EngineEventConverter(9, 2, 4, BlockHasher.of(4));
    long[] local = BlockHasher.of(4).localHashes(T8);
    ConvertedBatch out =
        c.convert(
            batch(
                null,
                EngineEvent.BlockStored.of(new long[] {10, 11}, null, T8, 4),
                EngineEvent.BlockStored.of(new long[] {12}, 11L, new int[] {9, 9, 9, 9}, 4),
                EngineEvent.BlockRemoved.of(12),
                new EngineEvent.AllBlocksCleared()));
    assertThat(data(out))
        .containsExactly(
            CacheEvent.storedAtRoot(new long[] {10, 11}, local),
            CacheEvent.stored(
                11, new long[] {12}, BlockHasher.of(4).localHashes(new int[] {9, 9, 9, 9})),
            CacheEvent.removed(12),
            CacheEvent.cleared());
    assertThat(out.events())
        .allSatisfy(e -> assertThat(e.event().worker()).isEqualTo(new Worker(9, 2)));
    assertThat(out.events()).allSatisfy(e -> assertThat(e.tier()).isEqualTo(StorageTier.DEVICE));
    assertThat(out.events().stream().mapToLong(e -> e.event().eventId()).toArray())
        .containsExactly(1, 2, 3, 4);
    assertThat(out.dropped()).isFalse();
  }

  @Test
  void theBatchRankWinsOverTheDefault() {
    EngineEventConverter c = new EngineEventConverter(9, 2, 4, BlockHasher.of(4));
    ConvertedBatch out = c.convert(batch(5, EngineEvent.BlockRemoved.of(1)));
    assertThat(out.events().get(0).event().worker()).isEqualTo(new Worker(9, 5));
  }

  @Test
  void onlyEngineBlocksWithAllTheirTokensAreIndexed() {
    EngineEventConverter c = new EngineEventConverter(1, 0, 4, BlockHasher.of(4));
    int[] sixTokens = {1, 2, 3, 4, 5, 6};
    ConvertedBatch out =
        c.convert(
            batch(
                0,
                EngineEvent.BlockStored.of(new long[] {10, 11}, null, sixTokens, 4),
                EngineEvent.BlockStored.of(new long[] {20}, 10L, new int[] {1, 2}, 4)));
    assertThat(data(out))
        .containsExactly(
            CacheEvent.storedAtRoot(new long[] {10}, BlockHasher.of(4).localHashes(sixTokens)));
    assertThat(out.droppedBlocks()).isEqualTo(2);
  }

  @Test
  void aStoreWithAnotherBlockSizeIsRefused() {
    EngineEventConverter c = new EngineEventConverter(1, 0, 4, BlockHasher.of(4));
    ConvertedBatch out =
        c.convert(batch(0, EngineEvent.BlockStored.of(new long[] {10}, null, T8, 8)));
    assertThat(out.events()).isEmpty();
    assertThat(out.refusedEvents()).isEqualTo(1);
  }

  // ------------------------------------------------------------------ salts

  @Test
  void theLoraNameSaltsTheLocalHashAndALoneLoraIdStandsInForIt() {
    EngineEventConverter c = new EngineEventConverter(1, 0, 4, BlockHasher.of(4));
    ConvertedBatch out =
        c.convert(
            batch(
                0,
                stored(new long[] {1}, null, new int[] {1, 2, 3, 4}, 4, "adapter", 7L, null),
                stored(new long[] {2}, null, new int[] {1, 2, 3, 4}, 4, null, 7L, null)));
    assertThat(((CacheEvent.Stored) data(out).get(0)).tokensHashes())
        .containsExactly(BlockHasher.of(4).withLora("adapter").localHashes(new int[] {1, 2, 3, 4}));
    assertThat(((CacheEvent.Stored) data(out).get(1)).tokensHashes())
        .containsExactly(BlockHasher.of(4).withLora("7").localHashes(new int[] {1, 2, 3, 4}));
  }

  @Test
  void theCacheSaltOfBlockZeroSaltsTheWholeChainIncludingLaterContinuations() {
    EngineEventConverter c = new EngineEventConverter(1, 0, 4, BlockHasher.of(4));
    BlockHasher salted = BlockHasher.of(4).withLora("a").withNamespace("tenant-1");
    List<List<Object>> extra = new ArrayList<>();
    extra.add(List.of("a", "tenant-1"));
    extra.add(List.of("a"));
    ConvertedBatch first =
        c.convert(batch(0, stored(new long[] {1, 2}, null, T8, 4, "a", null, extra)));
    ConvertedBatch next =
        c.convert(batch(0, stored(new long[] {3}, 2L, new int[] {5, 5, 5, 5}, 4, "a", null, null)));
    assertThat(((CacheEvent.Stored) data(first).get(0)).tokensHashes())
        .containsExactly(salted.localHashes(T8));
    assertThat(((CacheEvent.Stored) data(next).get(0)).tokensHashes())
        .containsExactly(salted.localHashes(new int[] {5, 5, 5, 5}));

    // once the parent is gone the converter no longer knows the chain's salt
    c.convert(batch(0, EngineEvent.BlockRemoved.of(2)));
    ConvertedBatch orphan =
        c.convert(batch(0, stored(new long[] {4}, 2L, new int[] {5, 5, 5, 5}, 4, "a", null, null)));
    assertThat(((CacheEvent.Stored) data(orphan).get(0)).tokensHashes())
        .containsExactly(BlockHasher.of(4).withLora("a").localHashes(new int[] {5, 5, 5, 5}));
  }

  @Test
  void anExplicitCacheSaltIsUsedAsIs() {
    EngineEventConverter c = new EngineEventConverter(1, 0, 4, BlockHasher.of(4));
    EngineEvent.BlockStored s =
        new EngineEvent.BlockStored(
            new long[] {1},
            false,
            0,
            new int[] {1, 2, 3, 4},
            4,
            null,
            null,
            null,
            null,
            null,
            null,
            "t");
    ConvertedBatch out = c.convert(batch(0, s));
    assertThat(((CacheEvent.Stored) data(out).get(0)).tokensHashes())
        .containsExactly(BlockHasher.of(4).withNamespace("t").localHashes(new int[] {1, 2, 3, 4}));
  }

  @Test
  void multimodalIdentifiersInTheExtraKeysBecomeMultimodalHashes() {
    EngineEventConverter c = new EngineEventConverter(1, 0, 4, BlockHasher.of(4));
    String id = "0123456789abcdef" + "f".repeat(48);
    List<List<Object>> extra = new ArrayList<>();
    extra.add(null);
    extra.add(List.of(List.of(id, 0L)));
    ConvertedBatch out =
        c.convert(batch(0, stored(new long[] {1, 2}, null, T8, 4, null, null, extra)));
    assertThat(((CacheEvent.Stored) data(out).get(0)).tokensHashes())
        .containsExactly(
            BlockHasher.of(4).localHashes(T8, Map.of(1, new long[] {0x0123456789abcdefL})));
  }

  // ------------------------------------------------------------------ engine blocks of k router
  // blocks

  @Test
  void anEngineBlockOfTwoRouterBlocksIsSplitAndRemovedWhole() {
    EngineEventConverter c = new EngineEventConverter(1, 0, 8, BlockHasher.of(4));
    int[] tokens = new int[16];
    for (int i = 0; i < 16; i++) tokens[i] = 100 + i;
    long[] local = BlockHasher.of(4).localHashes(tokens);
    long s0 = local[0];
    long s2 = SequenceHasher.next(101, local[2]);
    ConvertedBatch out =
        c.convert(batch(0, EngineEvent.BlockStored.of(new long[] {101, 102}, null, tokens, 8)));
    assertThat(data(out))
        .containsExactly(CacheEvent.storedAtRoot(new long[] {s0, 101, s2, 102}, local));

    long s4 = SequenceHasher.next(102, BlockHasher.of(4).localHashes(T8)[0]);
    ConvertedBatch child =
        c.convert(batch(0, EngineEvent.BlockStored.of(new long[] {103}, 102L, T8, 8)));
    assertThat(data(child))
        .containsExactly(
            CacheEvent.stored(102, new long[] {s4, 103}, BlockHasher.of(4).localHashes(T8)));

    ConvertedBatch removed = c.convert(batch(0, EngineEvent.BlockRemoved.of(103, 102, 999)));
    assertThat(data(removed)).containsExactly(CacheEvent.removed(103, s4, 102, s2, 999));
  }

  @Test
  void siblingEngineBlocksShareTheirLeadingSubBlocksUntilTheLastOneGoes() {
    EngineEventConverter c = new EngineEventConverter(1, 0, 8, BlockHasher.of(4));
    int[] a = {1, 2, 3, 4, 5, 6, 7, 8};
    int[] b = {1, 2, 3, 4, 9, 9, 9, 9};
    long shared = BlockHasher.of(4).localHashes(a)[0]; // a root chain starts with local[0]
    c.convert(batch(0, EngineEvent.BlockStored.of(new long[] {201}, null, a, 8)));
    c.convert(batch(0, EngineEvent.BlockStored.of(new long[] {202}, null, b, 8)));
    c.convert(batch(0, EngineEvent.BlockStored.of(new long[] {202}, null, b, 8))); // again
    assertThat(data(c.convert(batch(0, EngineEvent.BlockRemoved.of(201)))))
        .containsExactly(CacheEvent.removed(201));
    assertThat(data(c.convert(batch(0, EngineEvent.BlockRemoved.of(202)))))
        .containsExactly(CacheEvent.removed(202, shared));
  }

  @ParameterizedTest(name = "engine block {0}, router block {1}")
  @CsvSource({"4, 4", "8, 4", "8, 2", "6, 3"})
  void anIndexFedThroughTheConverterScoresWhatTheEngineHolds(int engineBlock, int routerBlock) {
    long seed = 42L * engineBlock + routerBlock;
    FakeEngine engine = new FakeEngine(engineBlock, 48);
    Workload w = new Workload(seed, engineBlock, true);
    EngineEventConverter c =
        new EngineEventConverter(3, 0, engineBlock, BlockHasher.of(routerBlock));
    BlockHasher router = BlockHasher.of(routerBlock);
    int k = engineBlock / routerBlock;
    try (KvIndex index = KvIndexes.radixTree()) {
      for (int step = 0; step < 400; step++) {
        w.step(engine);
        ConvertedBatch out = c.convert(new KvEventBatch(step, null, engine.drain(), 0));
        for (TieredEvent e : out.events()) index.apply(e.event());
        assertThat(index.stats().parentMissing())
            .as("seed %d step %d: parents missing", seed, step)
            .isZero();
        if (step % 20 == 19) {
          for (int[] p : w.probes()) {
            int score = index.findMatches(router.localHashes(p), false).score(new Worker(3, 0));
            // in router blocks: every whole engine block, and perhaps some leading sub-blocks of
            // the next one (held because another prompt shares them)
            assertThat(score / k)
                .as("seed %d step %d: score %d of a probe, in engine blocks", seed, step, score)
                .isEqualTo(engine.lookup(p));
          }
        }
      }
      assertThat(index.stats().blocksIndexed())
          .isBetween((long) engine.cachedBlocks(), (long) k * engine.cachedBlocks());
      if (k == 1) {
        assertThat(index.stats().blocksIndexed()).isEqualTo(engine.cachedBlocks());
      }
      assertThat(index.stats().blocksMissing()).as("removals of blocks the index lacked").isZero();
    }
  }

  // ------------------------------------------------------------------ rejected and ignored events

  @Test
  void aBatchThatNamesABlockAsItsOwnAncestorIsDroppedWholeAndChangesNothing() {
    EngineEventConverter c = new EngineEventConverter(1, 0, 4, BlockHasher.of(4));
    ConvertedBatch parent =
        c.convert(
            batch(
                0,
                EngineEvent.BlockRemoved.of(1),
                EngineEvent.BlockStored.of(new long[] {7}, 7L, new int[] {1, 2, 3, 4}, 4)));
    assertThat(parent.dropped()).isTrue();
    assertThat(parent.events()).isEmpty();
    assertThat(parent.dropReason()).contains("events[1]").contains("block 7 as its own parent");

    ConvertedBatch twice =
        c.convert(batch(0, EngineEvent.BlockStored.of(new long[] {5, 6, 5}, null, new int[12], 4)));
    assertThat(twice.dropReason()).contains("events[0]").contains("block 5 twice");
    assertThat(c.lastEventId()).isZero();
  }

  @Test
  void groupsKvrouterCannotScoreAreIgnoredAndTheMainGroupIsTheFirstFullAttentionOne() {
    EngineEventConverter c = new EngineEventConverter(1, 0, 4, BlockHasher.of(4));
    int[] t = {1, 2, 3, 4};
    ConvertedBatch out =
        c.convert(
            batch(
                0,
                // a group other than 0 without a kind: unknown
                new EngineEvent.BlockStored(
                    new long[] {1}, false, 0, t, 4, null, null, null, null, 1, null, null),
                // a sliding window without its window
                new EngineEvent.BlockStored(
                    new long[] {2},
                    false,
                    0,
                    t,
                    4,
                    null,
                    null,
                    null,
                    null,
                    0,
                    "sliding_window",
                    null),
                new EngineEvent.BlockRemoved(new long[] {3}, null, 2, null),
                new EngineEvent.BlockStored(
                    new long[] {4},
                    false,
                    0,
                    t,
                    4,
                    null,
                    null,
                    null,
                    null,
                    1,
                    "full_attention",
                    null),
                // group 0 is not the main group once group 1 named itself full attention
                new EngineEvent.BlockRemoved(new long[] {5}, null, 0, null),
                new EngineEvent.BlockRemoved(new long[] {4}, null, 1, null)));
    assertThat(out.ignoredEvents()).isEqualTo(4);
    assertThat(out.groupEvents()).isEmpty();
    assertThat(out.groupProblem()).contains("group 1").contains("no kv_cache_spec_kind");
    assertThat(c.mainGroup()).isEqualTo(1);
    assertThat(data(out))
        .containsExactly(
            CacheEvent.storedAtRoot(new long[] {4}, BlockHasher.of(4).localHashes(t)),
            CacheEvent.removed(4));
  }

  @Test
  void offDevicePlaceholdersAreCountedAndLeftOutAndTheirRemovalsIgnored() {
    EngineEventConverter c = new EngineEventConverter(1, 0, 4, BlockHasher.of(4));
    EngineEvent.BlockStored placeholder =
        new EngineEvent.BlockStored(
            new long[] {5}, false, 0, new int[0], 0, null, "CPU", null, null, null, null, null);
    ConvertedBatch out =
        c.convert(
            batch(
                0,
                EngineEvent.BlockStored.of(new long[] {5}, null, new int[] {1, 2, 3, 4}, 4),
                placeholder,
                new EngineEvent.BlockRemoved(new long[] {5}, "CPU", null, null)));
    assertThat(out.placeholderEvents()).isEqualTo(1);
    assertThat(out.refusedEvents()).isZero();
    // the device store only: the removal names a block the host tier never stored
    assertThat(out.events()).extracting(TieredEvent::tier).containsExactly(StorageTier.DEVICE);
    // a device store without tokens is no placeholder: another block size, refused as before
    ConvertedBatch device =
        c.convert(batch(0, EngineEvent.BlockStored.of(new long[] {6}, null, new int[0], 0)));
    assertThat(device.placeholderEvents()).isZero();
    assertThat(device.refusedEvents()).isEqualTo(1);
  }

  @Test
  void anOffloadedBlockAnnouncedByTwoChunksLeavesTheTierWithTheLastRemoval() {
    EngineEventConverter c = new EngineEventConverter(1, 0, 4, BlockHasher.of(4));
    int[] t = {1, 2, 3, 4, 5, 6, 7, 8};
    EngineEvent.BlockStored chunk =
        new EngineEvent.BlockStored(
            new long[] {10, 11}, false, 0, t, 4, null, "CPU", null, null, null, null, null);
    c.convert(batch(0, chunk));
    c.convert(batch(0, chunk));
    ConvertedBatch first =
        c.convert(batch(0, new EngineEvent.BlockRemoved(new long[] {10, 11}, "CPU", null, null)));
    assertThat(first.events()).isEmpty();
    ConvertedBatch second =
        c.convert(batch(0, new EngineEvent.BlockRemoved(new long[] {11, 10}, "CPU", null, null)));
    assertThat(second.events()).hasSize(1);
    assertThat(second.events().get(0).tier()).isEqualTo(StorageTier.HOST);
    assertThat(second.events().get(0).event().data()).isEqualTo(CacheEvent.removed(11, 10));
    // the device tier is not counted: one removal removes
    c.convert(
        batch(0, EngineEvent.BlockStored.of(new long[] {12}, null, new int[] {1, 2, 3, 4}, 4)));
    c.convert(
        batch(0, EngineEvent.BlockStored.of(new long[] {12}, null, new int[] {1, 2, 3, 4}, 4)));
    ConvertedBatch gpu =
        c.convert(batch(0, new EngineEvent.BlockRemoved(new long[] {12}, "GPU", null, null)));
    assertThat(data(gpu)).containsExactly(CacheEvent.removed(12));
  }

  @Test
  void theMediumSelectsTheTierAndResetClearsEveryRankAndTierSeen() {
    EngineEventConverter c = new EngineEventConverter(1, 0, 4, BlockHasher.of(4));
    c.convert(batch(0, offloaded(1, "CPU")));
    ConvertedBatch out =
        c.convert(
            batch(
                0,
                new EngineEvent.BlockRemoved(new long[] {1}, "CPU", null, null),
                new EngineEvent.BlockRemoved(new long[] {2}, "GPU", null, null)));
    c.convert(batch(3, offloaded(3, "s3")));
    assertThat(out.events().stream().map(TieredEvent::tier))
        .containsExactly(StorageTier.HOST, StorageTier.DEVICE);
    List<TieredEvent> cleared = c.reset();
    assertThat(cleared)
        .extracting(e -> e.tier() + "@" + e.event().worker().dpRank() + ":" + e.event().data())
        .containsExactlyInAnyOrder("HOST@0:Cleared", "DEVICE@0:Cleared", "EXTERNAL@3:Cleared");
    assertThat(c.reset()).isEmpty();
    RouterEvent last = cleared.get(cleared.size() - 1).event();
    assertThat(last.eventId()).isEqualTo(c.lastEventId()).isEqualTo(7);
  }

  private static EngineEvent.BlockStored offloaded(long hash, String medium) {
    return new EngineEvent.BlockStored(
        new long[] {hash}, false, 0, T8.clone(), 4, null, medium, null, null, null, null, null);
  }

  @ParameterizedTest
  @CsvSource(
      nullValues = "null",
      value = {
        "null, DEVICE",
        "'', DEVICE",
        "GPU, DEVICE",
        "gpu, DEVICE",
        "cuda, DEVICE",
        "CPU, HOST",
        "cpu_pinned, HOST",
        "DISK, DISK",
        "nvme, DISK",
        "STORAGE, DISK",
        "FS, DISK",
        "CPU_TIER1, HOST",
        "OBJ, EXTERNAL",
        "s3, EXTERNAL",
        "LMCache, EXTERNAL"
      })
  void mediaMapToTiers(String medium, StorageTier tier) {
    assertThat(StorageTier.ofMedium(medium)).isEqualTo(tier);
  }
}
