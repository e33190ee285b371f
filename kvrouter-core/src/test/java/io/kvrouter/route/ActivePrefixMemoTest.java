package io.kvrouter.route;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.hash.SequenceHasher;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * {@link ActiveSequences#activePrefix}, the active prefix found from an earlier answer, against a
 * straightforward reference: walk the prompt's chain from the root and count the blocks held by a
 * request in flight up to the first that is not. Seeded random prompts that share prefixes (a few
 * system prompts, then random turns from few values, so that chains agree for a while and part),
 * random adds and frees between queries, and for each query the last answer for its root block
 * (kept as SlotTable's root holders keep it: forgotten when a request of that root comes or leaves)
 * and none. The same prompt array asked twice, prompts that are a prefix of the earlier one, and
 * prompts that extend an earlier one (the same system prompt, other turns) come up too.
 */
class ActivePrefixMemoTest {

  /** An earlier answer, kept per root block as SlotTable's root holders keep it. */
  private record Memo(long[] prompt, int active) {}

  @Test
  void theAnswerFromAnEarlierOneIsTheWalksAnswer() {
    SplittableRandom rnd = new SplittableRandom(37_0520);
    ActiveSequences a = new ActiveSequences(Duration.ofSeconds(300), (id, seq, expired) -> {});
    List<String> live = new ArrayList<>();
    List<long[]> liveSeqs = new ArrayList<>();
    long[][] systems = new long[4][];
    for (int s = 0; s < systems.length; s++) systems[s] = randomLocal(rnd, 1 + rnd.nextInt(12));
    // the last answer per root block; dropped when a request of that root comes or leaves
    Map<Long, Memo> memos = new HashMap<>();
    int queries = 0;
    int withMemo = 0;
    long[] lastPrompt = new long[0];
    for (int step = 0; step < 4_000; step++) {
      int changes = rnd.nextInt(3) == 0 ? 1 + rnd.nextInt(3) : 0; // often none since the last query
      for (int c = 0; c < changes; c++) {
        long[] seq;
        if (!live.isEmpty() && rnd.nextInt(3) == 0) {
          int k = rnd.nextInt(live.size());
          assertThat(a.free(live.remove(k))).isTrue();
          seq = liveSeqs.remove(k);
        } else {
          seq = prompt(rnd, systems);
          String id = "r" + step + "-" + c;
          a.add(id, seq, 0, 0);
          live.add(id);
          liveSeqs.add(seq);
        }
        if (seq.length > 0) memos.remove(seq[0]);
      }
      HashSet<Long> active = new HashSet<>();
      for (long[] s : liveSeqs) for (long h : s) active.add(h);
      long[] query =
          switch (rnd.nextInt(4)) {
            case 0 -> lastPrompt; // the same array again
            case 1 -> cut(rnd, lastPrompt);
            default -> prompt(rnd, systems);
          };
      int expected = 0;
      for (long h : query) {
        if (!active.contains(h)) break;
        expected++;
      }
      int hint = rnd.nextInt(query.length + 2);
      Memo m = query.length == 0 ? null : memos.get(query[0]);
      if (m != null) withMemo++;
      assertThat(a.activePrefix(query, hint, m == null ? null : m.prompt, m == null ? 0 : m.active))
          .as("step %d, %d blocks, earlier answer %s", step, query.length, m)
          .isEqualTo(expected);
      assertThat(a.activePrefix(query, hint, null, 0))
          .as("step %d, none", step)
          .isEqualTo(expected);
      queries++;
      if (query.length > 0) memos.put(query[0], new Memo(query, expected));
      lastPrompt = query;
    }
    assertThat(queries).isEqualTo(4_000);
    assertThat(withMemo).as("queries with an earlier answer").isGreaterThan(1_500);
  }

  /** The same chain's first blocks (all of them, some, or none). */
  private static long[] cut(SplittableRandom rnd, long[] seq) {
    return Arrays.copyOf(seq, rnd.nextInt(seq.length + 1));
  }

  /** A system prompt (or none), then 0 to 20 random blocks: its chain of sequence hashes. */
  private static long[] prompt(SplittableRandom rnd, long[][] systems) {
    long[] system = rnd.nextInt(6) == 0 ? new long[0] : systems[rnd.nextInt(systems.length)];
    long[] turn = randomLocal(rnd, rnd.nextInt(21));
    long[] local = new long[system.length + turn.length];
    System.arraycopy(system, 0, local, 0, system.length);
    System.arraycopy(turn, 0, local, system.length, turn.length);
    return SequenceHasher.sequenceHashes(local);
  }

  private static long[] randomLocal(SplittableRandom rnd, int n) {
    long[] out = new long[n];
    for (int i = 0; i < n; i++) out[i] = rnd.nextInt(4); // few values: chains often share blocks
    return out;
  }
}
