package io.kvrouter.mockengine;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.Worker;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.hash.SequenceHasher;
import io.kvrouter.index.KvCacheGroup;
import io.kvrouter.index.KvCacheGroups;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The hybrid engine cache's per-group events against a reference: a naive per-(group, hash) mirror
 * fed only by the events must hold exactly what each group caches, and the hit that vLLM's rule
 * gives on the mirror (every cut tried from the top, each group's rule checked as docs/ingestion.md
 * states it) must be the hit the engine reports, on seeded random admissions, prefills and releases
 * under eviction.
 */
class HybridKvCacheTest {
  private static final int BS = 4;

  /** The naive mirror: what the events say each group holds. */
  private static final class Mirror implements HybridKvCache.Listener {
    final Map<Integer, Set<Long>> held = new HashMap<>();
    final List<String> log = new ArrayList<>();

    @Override
    public void stored(
        int group,
        KvCacheGroup kind,
        int[] positions,
        long[] hashes,
        long[] locals,
        long[] seq,
        int fromBlock,
        int toBlock) {
      // vLLM's store names the trailing blocks of its token range, chained from fromBlock - 1
      assertThat(positions.length).isPositive().isLessThanOrEqualTo(toBlock - fromBlock);
      for (int i = 0; i < positions.length; i++) {
        assertThat(positions[i]).isEqualTo(toBlock - positions.length + i);
        assertThat(hashes[i]).isEqualTo(seq[positions[i]]);
      }
      for (long h : hashes) held.computeIfAbsent(group, g -> new HashSet<>()).add(h);
      log.add("stored " + group + " " + Arrays.toString(positions));
    }

    @Override
    public void removed(int group, long hash) {
      assertThat(held.getOrDefault(group, Set.of()).remove(hash))
          .as("group %d removes a block it stored", group)
          .isTrue();
      log.add("removed " + group);
    }

    Set<Long> group(int g) {
      return held.getOrDefault(g, Set.of());
    }
  }

  /** vLLM's rule on the mirror, brute force: the largest cut every group serves. */
  private static int naiveHit(KvCacheGroups groups, Mirror m, int[] tokens) {
    long[] seq = SequenceHasher.sequenceHashes(BlockHasher.of(BS).localHashes(tokens));
    int cap = Math.min(seq.length, Math.max(0, tokens.length - 1) / BS);
    for (int c = cap; c > 0; c--) {
      boolean all = true;
      for (int g = 0; g < groups.size() && all; g++) {
        KvCacheGroup k = groups.get(g);
        int from =
            switch (k.kind()) {
              case FULL -> 0;
              case SLIDING_WINDOW -> Math.max(0, c - k.windowBlocks(BS));
              case STATE -> c - 1;
              case CHUNKED_LOCAL -> (c * BS / k.windowTokens()) * k.windowTokens() / BS;
            };
        for (int i = from; i < c && all; i++) all = m.group(g).contains(seq[i]);
      }
      if (all) return c;
    }
    return 0;
  }

  private static int[] prompt(long... parts) {
    // each part is a block of BS tokens named by the part; parts share prefixes when equal
    int[] t = new int[parts.length * BS + 1];
    for (int i = 0; i < parts.length; i++) {
      for (int j = 0; j < BS; j++) t[i * BS + j] = (int) (parts[i] * 100 + j);
    }
    t[t.length - 1] = 7; // a partial last block, as most prompts have
    return t;
  }

  @Test
  void aSlidingWindowLosesItsEarlyBlocksFirstSoTheHitFallsShortOfTheFullAttentionPrefix() {
    KvCacheGroups groups = KvCacheGroups.parse("full,sliding:9"); // 2 blocks before the cut
    Mirror m = new Mirror();
    HybridKvCache cache = new HybridKvCache(new Worker(0, 0), BS, 16, groups, m);
    int[] a = prompt(1, 2, 3, 4, 5, 6);
    assertThat(cache.admit(1, a).cachedBlocks()).isZero();
    cache.prefillDone(1); // the window frees blocks 0..3 (tokens before 25 - 9 + 1 = 17)
    cache.release(1);
    // 4 free pages left for 6 + 6: the next request evicts the window's early blocks first
    int[] b = prompt(9, 9, 9);
    assertThat(cache.admit(2, b).admitted()).isTrue();
    assertThat(cache.lookup(a))
        .as("full attention holds 6, the window holds blocks 4..5")
        .isEqualTo(6);
    cache.release(2);
    // a release frees full attention before the window's last blocks: the next 4 pages are the
    // window's blocks 1 and 0, then full attention's 5 and 4
    int[] c = prompt(8, 8);
    assertThat(cache.admit(3, c).admitted()).isTrue();
    assertThat(m.group(0))
        .contains(seqOf(a, 0), seqOf(a, 1), seqOf(a, 2), seqOf(a, 3))
        .doesNotContain(seqOf(a, 4), seqOf(a, 5));
    assertThat(m.group(1))
        .contains(seqOf(a, 4), seqOf(a, 5))
        .doesNotContain(seqOf(a, 0), seqOf(a, 1), seqOf(a, 2), seqOf(a, 3));
    // full attention serves 4 blocks, but no window of 2 held blocks ends at 4 or before
    assertThat(cache.lookup(a)).isZero();
    assertThat(naiveHit(groups, m, a)).isZero();
  }

  @Test
  void aStateGroupKeepsTheStatesAPromptsSuccessorsCanUse() {
    KvCacheGroups groups = KvCacheGroups.parse("full,state");
    Mirror m = new Mirror();
    HybridKvCache cache = new HybridKvCache(new Worker(0, 0), BS, 64, groups, m);
    int[] aligned = Arrays.copyOf(prompt(1, 2, 3), 3 * BS); // ends on a block boundary
    cache.admit(1, aligned);
    // the states after blocks 2 (the prompt's end) and 1 (what the same prompt can reuse)
    assertThat(m.log).contains("stored 1 [1, 2]");
    cache.prefillDone(1);
    cache.release(1);
    assertThat(cache.lookup(aligned)).isEqualTo(2);
    int[] longer = prompt(1, 2, 3, 4);
    assertThat(cache.lookup(longer)).isEqualTo(3);
    int[] other = prompt(1, 2, 9);
    assertThat(cache.lookup(other))
        .as("no state after block 1 of this path? there is")
        .isEqualTo(2);
    int[] first = prompt(1, 5);
    assertThat(cache.lookup(first)).as("no state after block 0").isZero();
  }

  @ParameterizedTest
  @ValueSource(
      strings = {
        "full,sliding:9",
        "sliding:13,full,state",
        "full,state,full",
        "full,chunked:8,sliding:5"
      })
  void randomStreamsKeepTheEventsAndTheHitExact(String groupsText) {
    KvCacheGroups groups = KvCacheGroups.parse(groupsText);
    for (long seed = 1; seed <= 3; seed++) {
      SplittableRandom rnd = new SplittableRandom(seed);
      Mirror m = new Mirror();
      HybridKvCache cache =
          new HybridKvCache(new Worker(0, 0), BS, 40 + rnd.nextInt(40), groups, m);
      List<Long> running = new ArrayList<>();
      List<int[]> prompts = new ArrayList<>();
      for (int op = 0; op < 1500; op++) {
        int dice = rnd.nextInt(10);
        if (dice < 4 || running.isEmpty()) {
          int[] p = randomPrompt(rnd, prompts);
          if (cache.pagesNeeded(p.length) > cache.capacity()) continue;
          int expected = naiveHit(groups, m, p);
          HybridKvCache.Admission a = cache.admit(op, p);
          assertThat(a.cachedBlocks()).as("seed %d op %d hit", seed, op).isEqualTo(expected);
          if (a.admitted()) {
            running.add((long) op);
            prompts.add(p);
          }
        } else if (dice < 7) {
          cache.prefillDone(running.get(rnd.nextInt(running.size())));
        } else {
          cache.release(running.remove(rnd.nextInt(running.size())));
        }
        for (int g = 0; g < groups.size(); g++) {
          long[] held = cache.cachedHashes(g);
          assertThat(held.length).isEqualTo(m.group(g).size());
          for (long h : held) assertThat(m.group(g)).contains(h);
        }
        if (!prompts.isEmpty()) {
          int[] probe = prompts.get(rnd.nextInt(prompts.size()));
          assertThat(cache.lookup(probe))
              .as("seed %d op %d lookup", seed, op)
              .isEqualTo(naiveHit(groups, m, probe));
        }
      }
      assertThat(m.log).anyMatch(s -> s.startsWith("removed"));
    }
  }

  /** A prompt that extends an earlier one now and then, or a fresh one over a small alphabet. */
  private static int[] randomPrompt(SplittableRandom rnd, List<int[]> earlier) {
    int blocks;
    long[] parts;
    if (!earlier.isEmpty() && rnd.nextBoolean()) {
      int[] base = earlier.get(rnd.nextInt(earlier.size()));
      int keep = rnd.nextInt(base.length / BS + 1);
      blocks = keep + rnd.nextInt(6);
      parts = new long[blocks];
      for (int i = 0; i < blocks; i++)
        parts[i] = i < keep ? base[i * BS] / 100 : 1 + rnd.nextInt(4);
    } else {
      blocks = 1 + rnd.nextInt(8);
      parts = new long[blocks];
      for (int i = 0; i < blocks; i++) parts[i] = 1L + rnd.nextInt(4);
    }
    int[] p = prompt(parts);
    return rnd.nextInt(4) == 0 ? Arrays.copyOf(p, p.length - 1) : p; // some end on a boundary
  }

  private static long seqOf(int[] tokens, int block) {
    return SequenceHasher.sequenceHashes(BlockHasher.of(BS).localHashes(tokens))[block];
  }
}
