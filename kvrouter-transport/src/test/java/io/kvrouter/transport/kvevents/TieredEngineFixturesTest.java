package io.kvrouter.transport.kvevents;

import static io.kvrouter.transport.kvevents.KvEventDecoderTest.msgpack;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.hash.BlockHasher;
import java.io.IOException;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.msgpack.core.MessageBufferPacker;

/**
 * Hand-built payloads in the exact shapes SGLang HiCache and LMCache publish their tiered events in
 * (read from their sources: SGLang's mem_cache KV events, LMCache's vLLM integration), decoded and
 * converted: each fixture names the source file of its shape and asserts the tier and the router
 * events that come out.
 */
class TieredEngineFixturesTest {
  private static final int[] T8 = {11, 12, 13, 14, 15, 16, 17, 18};

  private static void tokens(MessageBufferPacker p, int[] t) throws IOException {
    p.packArrayHeader(t.length);
    for (int v : t) p.packInt(v);
  }

  /**
   * SGLang's positional BlockStored (python/sglang/srt/disaggregation/kv_events.py, {@code
   * KVCacheEvent(array_like=True, tag=True)} without omit_defaults: all six fields always present):
   * {@code ["BlockStored", block_hashes, parent_block_hash, token_ids, block_size, lora_id,
   * medium]}.
   */
  private static void sglangStored(MessageBufferPacker p, String medium) throws IOException {
    p.packArrayHeader(7).packString("BlockStored");
    p.packArrayHeader(2).packLong(101).packLong(102);
    p.packNil();
    tokens(p, T8);
    p.packInt(4).packNil().packString(medium);
  }

  /** SGLang's {@code ["BlockRemoved", block_hashes, medium]} (same file). */
  private static void sglangRemoved(MessageBufferPacker p, String medium) throws IOException {
    p.packArrayHeader(3).packString("BlockRemoved");
    p.packArrayHeader(2).packLong(101).packLong(102);
    p.packString(medium);
  }

  /**
   * One HiRadixCache write-through step (hiradix_cache.py): the pages are stored on the GPU, the
   * GPU-to-host copy is confirmed ({@code CPU_PINNED}), then the GPU copy is evicted and the host
   * copy kept. SGLang's EventBatch is {@code [ts, events, attn_dp_rank]}.
   */
  private static byte[] sglangWriteThrough() {
    return msgpack(
        p -> {
          p.packArrayHeader(3).packDouble(1.25).packArrayHeader(3);
          sglangStored(p, "GPU");
          sglangStored(p, "CPU_PINNED");
          sglangRemoved(p, "GPU");
          p.packInt(1);
        });
  }

  private static byte[] sglangCleared() {
    return msgpack(
        p -> {
          p.packArrayHeader(3).packDouble(2.5).packArrayHeader(1);
          p.packArrayHeader(1).packString("AllBlocksCleared");
          p.packInt(1);
        });
  }

  @Test
  void sglangHostStoreAfterTheDeviceStoreSurvivesTheDeviceRemoval() {
    KvEventBatch b = KvEventDecoder.decode(sglangWriteThrough());
    assertThat(b.dpRank()).isEqualTo(1);
    assertThat(b.events()).hasSize(3);
    assertThat(((EngineEvent.BlockStored) b.events().get(1)).medium()).isEqualTo("CPU_PINNED");

    EngineEventConverter c = new EngineEventConverter(5, 0, 4, BlockHasher.of(4));
    ConvertedBatch out = c.convert(b);
    assertThat(out.events())
        .extracting(TieredEvent::tier)
        .containsExactly(StorageTier.DEVICE, StorageTier.HOST, StorageTier.DEVICE);
    assertThat(out.events()).allSatisfy(e -> assertThat(e.event().worker().dpRank()).isEqualTo(1));
    long[] local = BlockHasher.of(4).localHashes(T8);
    CacheEvent.Stored gpu = (CacheEvent.Stored) out.events().get(0).event().data();
    CacheEvent.Stored host = (CacheEvent.Stored) out.events().get(1).event().data();
    assertThat(gpu.hasParent()).isFalse();
    assertThat(gpu.blockHashes()).containsExactly(101, 102);
    assertThat(gpu.tokensHashes()).containsExactly(local);
    // medium-invariant page hashes: the host copy is the same chain as the device one
    assertThat(host.blockHashes()).containsExactly(101, 102);
    assertThat(host.tokensHashes()).containsExactly(local);
    assertThat(((CacheEvent.Removed) out.events().get(2).event().data()).blockHashes())
        .containsExactly(101, 102);

    // the host copy is evicted later: a host removal is passed on, once
    byte[] evictHost =
        msgpack(
            p -> {
              p.packArrayHeader(3).packDouble(3.0).packArrayHeader(2);
              sglangRemoved(p, "CPU_PINNED");
              sglangRemoved(p, "CPU_PINNED");
              p.packInt(1);
            });
    ConvertedBatch evicted = c.convert(KvEventDecoder.decode(evictHost));
    assertThat(evicted.events()).hasSize(1);
    assertThat(evicted.events().get(0).tier()).isEqualTo(StorageTier.HOST);
    assertThat(((CacheEvent.Removed) evicted.events().get(0).event().data()).blockHashes())
        .containsExactly(101, 102);
  }

  /**
   * SGLang's map form (SGLang #37482: tagged maps, {@code "type"} key) with its L3 media: {@code
   * DISK} and {@code EXTERNAL} ({@code StorageMedium} in kv_events.py, PR #22894).
   */
  @Test
  void sglangMapEventsOnDiskAndExternalMedia() {
    byte[] payload =
        msgpack(
            p -> {
              p.packArrayHeader(3).packDouble(1.0).packArrayHeader(2);
              for (String medium : List.of("DISK", "EXTERNAL")) {
                p.packMapHeader(7).packString("type").packString("BlockStored");
                p.packString("block_hashes").packArrayHeader(2).packLong(101).packLong(102);
                p.packString("parent_block_hash").packNil();
                p.packString("token_ids");
                tokens(p, T8);
                p.packString("block_size").packInt(4);
                p.packString("lora_id").packNil();
                p.packString("medium").packString(medium);
              }
              p.packInt(0);
            });
    ConvertedBatch out =
        new EngineEventConverter(5, 0, 4, BlockHasher.of(4))
            .convert(KvEventDecoder.decode(payload));
    assertThat(out.events())
        .extracting(TieredEvent::tier)
        .containsExactly(StorageTier.DISK, StorageTier.EXTERNAL);
    assertThat(out.events())
        .allSatisfy(
            e ->
                assertThat(((CacheEvent.Stored) e.event().data()).blockHashes())
                    .containsExactly(101, 102));
  }

  /**
   * SGLang's {@code BlockStoredWithMetadata} (kv_events.py: {@code BlockStored} plus a trailing
   * {@code metadata: BlockStoredMetadata(cache_salt)}, a map, for salted requests): {@code
   * ["BlockStored", hashes, parent, token_ids, block_size, lora_id, medium, {"cache_salt": s}]}.
   * The salt is the namespace of the router's local hashes; the map is not a LoRA name.
   */
  @Test
  void sglangSaltedStoresCarryTheirSaltInATrailingMetadataMap() {
    byte[] payload =
        msgpack(
            p -> {
              p.packArrayHeader(3).packDouble(1.0).packArrayHeader(1);
              p.packArrayHeader(8).packString("BlockStored");
              p.packArrayHeader(2).packLong(101).packLong(102);
              p.packNil();
              tokens(p, T8);
              p.packInt(4).packNil().packString("CPU_PINNED");
              p.packMapHeader(1).packString("cache_salt").packString("tenant-a");
              p.packInt(0);
            });
    KvEventBatch b = KvEventDecoder.decode(payload);
    EngineEvent.BlockStored s = (EngineEvent.BlockStored) b.events().get(0);
    assertThat(s.cacheSalt()).isEqualTo("tenant-a");
    assertThat(s.loraName()).isNull();
    ConvertedBatch out = new EngineEventConverter(5, 0, 4, BlockHasher.of(4)).convert(b);
    assertThat(out.events()).extracting(TieredEvent::tier).containsExactly(StorageTier.HOST);
    CacheEvent.Stored host = (CacheEvent.Stored) out.events().get(0).event().data();
    assertThat(host.tokensHashes())
        .containsExactly(BlockHasher.of(4).withNamespace("tenant-a").localHashes(T8))
        .doesNotContain(BlockHasher.of(4).localHashes(T8)[0]);
  }

  @Test
  void sglangClearScopeClearsEveryTierAndVllmsTheDeviceOnly() {
    EngineEventConverter sglang =
        new EngineEventConverter(5, 0, 4, BlockHasher.of(4), ClearScope.ALL_TIERS);
    sglang.convert(KvEventDecoder.decode(sglangWriteThrough()));
    ConvertedBatch cleared = sglang.convert(KvEventDecoder.decode(sglangCleared()));
    assertThat(cleared.events())
        .extracting(TieredEvent::tier)
        .containsExactly(StorageTier.values());
    assertThat(cleared.events())
        .allSatisfy(
            e -> {
              assertThat(e.event().data()).isInstanceOf(CacheEvent.Cleared.class);
              assertThat(e.event().worker().dpRank()).isEqualTo(1);
            });
    // the host reference counts went with the clear: a late host removal names nothing
    byte[] lateRemoval =
        msgpack(
            p -> {
              p.packArrayHeader(3).packDouble(3.0).packArrayHeader(1);
              sglangRemoved(p, "CPU_PINNED");
              p.packInt(1);
            });
    assertThat(sglang.convert(KvEventDecoder.decode(lateRemoval)).events()).isEmpty();

    EngineEventConverter vllm = new EngineEventConverter(5, 0, 4, BlockHasher.of(4));
    assertThat(vllm.clearScope()).isEqualTo(ClearScope.DEVICE);
    vllm.convert(KvEventDecoder.decode(sglangWriteThrough()));
    ConvertedBatch deviceOnly = vllm.convert(KvEventDecoder.decode(sglangCleared()));
    assertThat(deviceOnly.events())
        .extracting(TieredEvent::tier)
        .containsExactly(StorageTier.DEVICE);
    // the host copy is still counted: its removal is passed on
    assertThat(vllm.convert(KvEventDecoder.decode(lateRemoval)).events())
        .extracting(TieredEvent::tier)
        .containsExactly(StorageTier.HOST);
  }

  @Test
  void clearScopeWireNames() {
    assertThat(ClearScope.parse("device")).isEqualTo(ClearScope.DEVICE);
    assertThat(ClearScope.parse("ALL_TIERS")).isEqualTo(ClearScope.ALL_TIERS);
    assertThat(ClearScope.ALL_TIERS.wireName()).isEqualTo("all_tiers");
    assertThatThrownBy(() -> ClearScope.parse("host"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("\"device\" or \"all_tiers\"")
        .hasMessageContaining("\"host\"");
  }

  /**
   * LMCache's store event (lmcache/v1/kv_events.py, array_like {@code BlockStored(block_hashes,
   * parent_block_hash, token_ids, block_size, lora_id, medium)}; lmcache/v1/cache_engine.py
   * store()): one event per chunk, {@code block_hashes=[chunk_hash]}, parent = the previous chunk's
   * hash, {@code block_size} = the chunk's token count, {@code medium="cpu"} in lower case. Store
   * only: LMCache publishes no BlockRemoved nor AllBlocksCleared.
   */
  private static void lmcacheStored(
      MessageBufferPacker p, long hash, Long parent, int[] chunk, String medium)
      throws IOException {
    p.packArrayHeader(7).packString("BlockStored");
    p.packArrayHeader(1).packLong(hash);
    if (parent == null) p.packNil();
    else p.packLong(parent);
    tokens(p, chunk);
    p.packInt(chunk.length).packNil().packString(medium);
  }

  /**
   * With LMCache's chunk size equal to the engine block size (what LMCache PR #5076 asks for
   * routing), its lower-case {@code "cpu"} chunks are host-tier stores of the engine's chain;
   * LMCache 0.4's canonical {@code "CPU"} is the same tier.
   */
  @Test
  void lmcacheChunksOfTheEngineBlockSizeAreHostStores() {
    byte[] payload =
        msgpack(
            p -> {
              p.packArrayHeader(2).packDouble(4.0).packArrayHeader(2);
              lmcacheStored(p, 201, null, new int[] {11, 12, 13, 14}, "cpu");
              lmcacheStored(p, 202, 201L, new int[] {15, 16, 17, 18}, "CPU");
            });
    KvEventBatch b = KvEventDecoder.decode(payload);
    assertThat(b.dpRank()).isNull();
    ConvertedBatch out = new EngineEventConverter(5, 3, 4, BlockHasher.of(4)).convert(b);
    assertThat(out.refusedEvents()).isZero();
    assertThat(out.events())
        .extracting(TieredEvent::tier)
        .containsExactly(StorageTier.HOST, StorageTier.HOST);
    long[] local = BlockHasher.of(4).localHashes(T8);
    CacheEvent.Stored first = (CacheEvent.Stored) out.events().get(0).event().data();
    CacheEvent.Stored second = (CacheEvent.Stored) out.events().get(1).event().data();
    assertThat(first.hasParent()).isFalse();
    assertThat(first.blockHashes()).containsExactly(201);
    assertThat(first.tokensHashes()).containsExactly(local[0]);
    assertThat(second.hasParent()).isTrue();
    assertThat(second.parentHash()).isEqualTo(201);
    assertThat(second.blockHashes()).containsExactly(202);
    assertThat(second.tokensHashes()).containsExactly(local[1]);
    assertThat(out.events().get(0).event().worker().dpRank()).isEqualTo(3);
  }

  /**
   * LMCache's default 256-token chunks (and its shorter tail chunk) are not engine blocks: their
   * hash is LMCache's own chunk hash, so they are refused and counted, never indexed.
   */
  @Test
  void lmcacheChunksOfAnotherSizeAreRefused() {
    int[] chunk = new int[8];
    for (int i = 0; i < chunk.length; i++) chunk[i] = 100 + i;
    byte[] payload =
        msgpack(
            p -> {
              p.packArrayHeader(2).packDouble(4.0).packArrayHeader(2);
              lmcacheStored(p, 301, null, chunk, "cpu");
              lmcacheStored(p, 302, 301L, new int[] {1, 2, 3}, "cpu");
            });
    ConvertedBatch out =
        new EngineEventConverter(5, 0, 4, BlockHasher.of(4))
            .convert(KvEventDecoder.decode(payload));
    assertThat(out.events()).isEmpty();
    assertThat(out.refusedEvents()).isEqualTo(2);
  }
}
