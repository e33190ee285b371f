package io.kvrouter.prefixcache;

import static io.kvrouter.prefixcache.RadixTree.ROOT;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvrouter.TestWaits;
import java.util.ArrayList;
import java.util.List;
import java.util.OptionalInt;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Hand-checked behaviour of {@link RadixTree}, one rule of DESIGN.md §5 per test. */
@Timeout(value = TestWaits.HANG_SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class RadixTreeTest {

  private static int[] t(int... tokens) {
    return tokens;
  }

  private static List<Integer> ints(int from, int count) {
    return IntStream.range(from, from + count).boxed().toList();
  }

  /** The concatenated labels of the nodes from the root down to {@code node}. */
  private static int[] fullKey(RadixTree<?> tree, int node) {
    List<int[]> parts = new ArrayList<>();
    for (int n = node; n != ROOT; n = tree.parent(n).getAsInt()) {
      parts.add(0, tree.key(n));
    }
    return parts.stream().flatMapToInt(IntStream::of).toArray();
  }

  private static List<Integer> evictAll(RadixTree<Integer> tree, int n) {
    List<Integer> out = new ArrayList<>();
    tree.evict(n, out::add);
    return out;
  }

  @Test
  void handExampleSplitAndMatch() {
    RadixTree<String> tree = new RadixTree<>(1);
    RadixTree.Insert<String> first = tree.insert(t(1, 2, 3), List.of("a", "b", "c"));
    int abc = first.node();
    assertThat(abc).isEqualTo(1);
    assertThat(first.handedBack()).isEmpty();
    assertThat(tree.size()).isEqualTo(3);

    RadixTree.Insert<String> second = tree.insert(t(1, 2, 4, 5), List.of("x", "y", "d", "e"));
    assertThat(second.handedBack()).containsExactly("x", "y");
    int de = second.node();
    int ab = tree.parent(abc).getAsInt();
    // the split: a new middle node "1 2" (a b); the old child keeps its id and becomes "3" (c)
    assertThat(ab).isNotIn(ROOT, abc, de);
    assertThat(tree.key(ab)).containsExactly(1, 2);
    assertThat(tree.values(ab)).containsExactly("a", "b");
    assertThat(tree.parent(ab)).isEqualTo(OptionalInt.of(ROOT));
    assertThat(tree.key(abc)).containsExactly(3);
    assertThat(tree.values(abc)).containsExactly("c");
    assertThat(tree.key(de)).containsExactly(4, 5);
    assertThat(tree.values(de)).containsExactly("d", "e");
    assertThat(tree.parent(de)).isEqualTo(OptionalInt.of(ab));
    assertThat(tree.children(ab)).containsExactly(abc, de);
    assertThat(tree.children(ROOT)).containsExactly(ab);
    assertThat(tree.nodeCount()).isEqualTo(3);
    assertThat(tree.size()).isEqualTo(5);

    RadixTree.Match m = tree.matchPrefix(t(1, 2, 3, 9));
    assertThat(m.matchedTokens()).isEqualTo(3);
    assertThat(m.path()).containsExactly(ab, abc); // labels "1 2", "3"
    assertThat(tree.key(m.path()[0])).containsExactly(1, 2);
    assertThat(tree.key(m.path()[1])).containsExactly(3);
    assertThat(tree.size()).isEqualTo(5);

    m = tree.matchPrefix(t(1, 2, 7));
    assertThat(m.matchedTokens()).isEqualTo(2);
    assertThat(m.path()).containsExactly(ab);
    assertThat(tree.size()).isEqualTo(5);

    m = tree.matchPrefix(t(1, 9));
    assertThat(m.matchedTokens()).isEqualTo(1);
    int one = m.path()[0];
    assertThat(m.path()).hasSize(1);
    assertThat(one).isNotIn(ROOT, ab, abc, de);
    assertThat(tree.key(one)).containsExactly(1);
    assertThat(tree.values(one)).containsExactly("a");
    assertThat(tree.key(ab)).containsExactly(2); // old node keeps its id and the lower part
    assertThat(tree.values(ab)).containsExactly("b");
    assertThat(tree.parent(ab)).isEqualTo(OptionalInt.of(one));
    assertThat(tree.children(one)).containsExactly(ab);
    assertThat(tree.children(ROOT)).containsExactly(one);
    assertThat(tree.size()).isEqualTo(5);
    assertThat(tree.nodeCount()).isEqualTo(4);

    m = tree.matchPrefix(t(7, 1));
    assertThat(m.matchedTokens()).isZero();
    assertThat(m.path()).isEmpty();
    assertThat(tree.size()).isEqualTo(5);
    assertThat(fullKey(tree, abc)).containsExactly(1, 2, 3);
    assertThat(fullKey(tree, de)).containsExactly(1, 2, 4, 5);
    tree.checkInvariants();
  }

  @Test
  void granuleMatchesWholeRunsOnly() {
    RadixTree<Integer> tree = new RadixTree<>(2);
    int leaf = tree.insert(t(1, 2, 3, 4), List.of(12, 34)).node();

    RadixTree.Match m = tree.matchPrefix(t(1, 2, 3, 9));
    assertThat(m.matchedTokens()).isEqualTo(2);
    int upper = m.path()[0];
    assertThat(m.path()).containsExactly(upper);
    assertThat(tree.key(upper)).containsExactly(1, 2);
    assertThat(tree.values(upper)).containsExactly(12);
    assertThat(tree.key(leaf)).containsExactly(3, 4); // split between runs, not inside one
    assertThat(tree.values(leaf)).containsExactly(34);

    assertThat(tree.matchPrefix(t(1)).matchedTokens()).isZero();
    assertThat(tree.matchPrefix(t(1)).path()).isEmpty();
    assertThat(tree.matchPrefix(t(1, 2, 3)).matchedTokens()).isEqualTo(2);
    assertThat(tree.matchPrefix(t(1, 2, 3, 4, 5)).matchedTokens()).isEqualTo(4);
    assertThat(tree.matchPrefix(t(1, 3)).matchedTokens()).isZero();
    assertThat(tree.nodeCount()).isEqualTo(2);
    assertThat(tree.size()).isEqualTo(2);
    tree.checkInvariants();
  }

  @Test
  void reinsertingHandsEveryValueBack() {
    RadixTree<Integer> tree = new RadixTree<>(2);
    int a = tree.insert(t(1, 2, 3, 4, 5, 6), List.of(1, 2, 3)).node();
    RadixTree.Insert<Integer> again = tree.insert(t(1, 2, 3, 4, 5, 6), List.of(7, 8, 9));
    assertThat(again.node()).isEqualTo(a);
    assertThat(again.handedBack()).containsExactly(7, 8, 9);
    assertThat(tree.values(a)).containsExactly(1, 2, 3);

    // a shorter key that ends inside the edge splits it and hands back its values too
    RadixTree.Insert<Integer> shorter = tree.insert(t(1, 2, 3, 4), List.of(10, 11));
    assertThat(shorter.handedBack()).containsExactly(10, 11);
    assertThat(tree.key(shorter.node())).containsExactly(1, 2, 3, 4);
    assertThat(tree.values(shorter.node())).containsExactly(1, 2);
    assertThat(tree.parent(a)).isEqualTo(OptionalInt.of(shorter.node()));
    assertThat(tree.size()).isEqualTo(3);

    RadixTree.Insert<Integer> empty = tree.insert(new int[0], List.of());
    assertThat(empty.node()).isEqualTo(ROOT);
    assertThat(empty.handedBack()).isEmpty();
    assertThat(tree.size()).isEqualTo(3);
    tree.checkInvariants();
  }

  @Test
  void lruOrderFollowsLastUse() {
    RadixTree<Integer> tree = new RadixTree<>(1);
    int a = tree.insert(t(1, 1), List.of(1, 2)).node();
    int b = tree.insert(t(2, 2), List.of(3, 4)).node();
    int c = tree.insert(t(3, 3), List.of(5, 6)).node();
    assertThat(tree.lruOrder()).containsExactly(a, b, c);

    tree.matchPrefix(t(1, 1, 9)); // a is now the newest
    assertThat(tree.lruOrder()).containsExactly(b, c, a);
    tree.insert(t(2, 2), List.of(7, 8)); // a duplicate insert is a use as well
    assertThat(tree.lruOrder()).containsExactly(c, a, b);
    tree.matchPrefix(t(9)); // a miss touches nothing
    assertThat(tree.lruOrder()).containsExactly(c, a, b);

    // a match that ends inside c splits it: the middle is walked, the lower part c is not
    RadixTree.Match m = tree.matchPrefix(t(3, 4));
    int c3 = m.path()[0];
    assertThat(tree.key(c3)).containsExactly(3);
    assertThat(tree.lruOrder()).containsExactly(c, a, b);
    assertThat(tree.stamp(c3)).isGreaterThan(tree.stamp(b));

    assertThat(evictAll(tree, 1)).containsExactly(6); // c's lower part, oldest
    // c3 became a leaf at its own stamp, which is the newest one
    assertThat(tree.lruOrder()).containsExactly(a, b, c3);
    assertThat(evictAll(tree, 1)).containsExactly(1, 2);
    assertThat(tree.lruOrder()).containsExactly(b, c3);
    tree.checkInvariants();
  }

  @Test
  void aChildlessParentBecomesEvictable() {
    RadixTree<Integer> tree = new RadixTree<>(1);
    int parent = tree.insert(t(1, 2), List.of(1, 2)).node();
    int child = tree.insert(t(1, 2, 3), List.of(0, 0, 3)).node(); // parent stamped here
    int newer = tree.insert(t(5), List.of(5)).node();
    int newest = tree.insert(t(6), List.of(6)).node();
    assertThat(tree.parent(child)).isEqualTo(OptionalInt.of(parent));
    assertThat(tree.lruOrder()).containsExactly(child, newer, newest);

    assertThat(evictAll(tree, 1)).containsExactly(3);
    // parent joins at its own stamp (that of the child's insert): before newer, not at the end
    assertThat(tree.lruOrder()).containsExactly(parent, newer, newest);
    assertThat(evictAll(tree, 1)).containsExactly(1, 2);
    assertThat(tree.lruOrder()).containsExactly(newer, newest);

    // a parent in the middle of the list: its stamp lies between two other leaves
    RadixTree<Integer> t2 = new RadixTree<>(1);
    int old = t2.insert(t(9), List.of(9)).node();
    int p = t2.insert(t(1), List.of(1)).node();
    int kid = t2.insert(t(1, 2), List.of(0, 2)).node();
    int later = t2.insert(t(8), List.of(8)).node();
    t2.matchPrefix(t(9)); // old becomes the newest
    t2.lock(later);
    assertThat(t2.lruOrder()).containsExactly(kid, old);
    assertThat(evictAll(t2, 1)).containsExactly(2);
    assertThat(t2.lruOrder()).containsExactly(p, old);
    t2.unlock(later); // joins at its own stamp, between p and old
    assertThat(t2.lruOrder()).containsExactly(p, later, old);
    tree.checkInvariants();
    t2.checkInvariants();
  }

  @Test
  void locksPinThePath() {
    RadixTree<Integer> tree = new RadixTree<>(1);
    int upper = tree.insert(t(1, 2), List.of(1, 2)).node();
    int leaf = tree.insert(t(1, 2, 3), List.of(0, 0, 3)).node();
    int other = tree.insert(t(7), List.of(7)).node();

    tree.lock(leaf);
    tree.lock(leaf);
    assertThat(tree.lockCount(leaf)).isEqualTo(2);
    assertThat(tree.lockCount(upper)).isEqualTo(2);
    assertThat(tree.lockCount(ROOT)).isZero();
    assertThat(tree.lruOrder()).containsExactly(other);
    assertThat(evictAll(tree, 100)).containsExactly(7);
    assertThat(tree.size()).isEqualTo(3);
    assertThat(tree.lruOrder()).isEmpty();
    assertThat(tree.evict(1, v -> {})).isZero();

    tree.unlock(leaf);
    assertThat(tree.lockCount(leaf)).isEqualTo(1);
    assertThat(tree.lockCount(upper)).isEqualTo(1);
    assertThat(tree.lruOrder()).isEmpty();
    assertThat(tree.evict(1, v -> {})).isZero();

    tree.lock(upper); // a lock on the ancestor nests with the one below it
    tree.unlock(leaf);
    assertThat(tree.lockCount(leaf)).isZero();
    assertThat(tree.lockCount(upper)).isEqualTo(1);
    assertThat(tree.lruOrder()).containsExactly(leaf);
    assertThat(evictAll(tree, 100)).containsExactly(3); // upper stays pinned
    assertThat(tree.lruOrder()).isEmpty();

    tree.unlock(upper);
    assertThat(tree.lruOrder()).containsExactly(upper);
    assertThat(evictAll(tree, 100)).containsExactly(1, 2);
    assertThat(tree.isEmpty()).isTrue();

    tree.lock(ROOT); // does nothing
    assertThat(tree.lockCount(ROOT)).isZero();
    tree.checkInvariants();
  }

  @Test
  void aSplitInheritsTheLocksBelowIt() {
    RadixTree<Integer> tree = new RadixTree<>(1);
    int leaf = tree.insert(t(1, 2, 3, 4), List.of(1, 2, 3, 4)).node();
    tree.lock(leaf);
    tree.lock(leaf);
    RadixTree.Match m = tree.matchPrefix(t(1, 2, 9));
    int mid = m.path()[0];
    assertThat(tree.key(mid)).containsExactly(1, 2);
    assertThat(tree.lockCount(mid)).isEqualTo(2);
    assertThat(tree.lockCount(leaf)).isEqualTo(2);
    int side = tree.insert(t(1, 2, 8), List.of(0, 0, 8)).node();
    assertThat(tree.parent(side)).isEqualTo(OptionalInt.of(mid));
    assertThat(tree.lockCount(side)).isZero();
    assertThat(tree.lruOrder()).containsExactly(side);

    tree.unlock(leaf);
    tree.unlock(leaf);
    assertThat(tree.lockCount(mid)).isZero();
    assertThat(tree.lruOrder()).containsExactly(leaf, side);
    assertThat(evictAll(tree, 100)).containsExactly(3, 4, 8, 1, 2);
    assertThat(tree.nodeCount()).isZero();
    tree.checkInvariants();
  }

  @Test
  void unlockWithoutALockThrows() {
    RadixTree<Integer> tree = new RadixTree<>(1);
    int leaf = tree.insert(t(1, 2), List.of(1, 2)).node();
    assertThatThrownBy(() -> tree.unlock(leaf)).isInstanceOf(IllegalStateException.class);
    tree.lock(leaf);
    tree.unlock(leaf);
    assertThatThrownBy(() -> tree.unlock(leaf)).isInstanceOf(IllegalStateException.class);
    assertThat(tree.lockCount(leaf)).isZero();
    assertThat(tree.lruOrder()).containsExactly(leaf);
    // ids that are not live nodes are rejected everywhere
    assertThatThrownBy(() -> tree.unlock(42)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> tree.lock(-1)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> tree.key(2)).isInstanceOf(IllegalArgumentException.class);
    tree.evict(1, v -> {});
    assertThatThrownBy(() -> tree.values(leaf)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> tree.lockCount(leaf)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> new RadixTree<Integer>(0))
        .isInstanceOf(IllegalArgumentException.class);
    tree.checkInvariants();
  }

  @Test
  void insertNeedsOneValuePerGranule() {
    RadixTree<Integer> tree = new RadixTree<>(2);
    assertThatThrownBy(() -> tree.insert(t(1, 2, 3, 4), List.of(1)))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> tree.insert(t(1, 2, 3), List.of(1, 2)))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> tree.insert(t(1, 2, 3), List.of(1)))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> tree.insert(new int[0], List.of(1)))
        .isInstanceOf(IllegalArgumentException.class);
    assertThat(tree.isEmpty()).isTrue();
    assertThat(tree.nodeCount()).isZero();
    assertThat(tree.insert(t(1, 2, 3, 4), List.of(1, 2)).handedBack()).isEmpty();
    assertThat(tree.size()).isEqualTo(2);
    tree.checkInvariants();
  }

  @Test
  void aKeyCutAtALimitActsAsItsCopy() {
    RadixTree<Integer> cut = new RadixTree<>(2);
    RadixTree<Integer> copied = new RadixTree<>(2);
    int[] key = t(1, 2, 3, 4, 5); // the last token lies past the limit
    RadixTree.Insert<Integer> a = cut.insert(key, 4, List.of(12, 34));
    RadixTree.Insert<Integer> b = copied.insert(t(1, 2, 3, 4), List.of(12, 34));
    assertThat(cut.key(a.node())).containsExactly(1, 2, 3, 4); // the leaf's label stops at 4
    assertThat(a.handedBack()).isEqualTo(b.handedBack());
    int[] longer = t(1, 2, 3, 9, 9, 9);
    RadixTree.Match m = cut.matchPrefix(longer, 4);
    assertThat(m).isEqualTo(copied.matchPrefix(t(1, 2, 3, 9)));
    assertThat(m.matchedTokens()).isEqualTo(2);
    // the first run is present: the caller's value for it is handed back
    assertThat(cut.insert(longer, 6, List.of(1, 2, 3)).handedBack()).containsExactly(1);
    assertThat(cut.matchPrefix(t(1, 2, 3, 9, 9, 9, 7), 6).matchedTokens()).isEqualTo(6);
    assertThat(cut.matchPrefix(t(1, 2, 3, 9, 9, 9, 7), 5).matchedTokens()).isEqualTo(4);
    assertThatThrownBy(() -> cut.matchPrefix(key, 6)).isInstanceOf(IndexOutOfBoundsException.class);
    assertThatThrownBy(() -> cut.insert(key, 3, List.of(1)))
        .isInstanceOf(IllegalArgumentException.class);
    cut.checkInvariants();
  }

  @Test
  void freedSlotsAreReused() {
    RadixTree<Integer> tree = new RadixTree<>(1);
    tree.insert(t(0), List.of(0));
    int maxId = 0;
    for (int round = 1; round <= 1_000; round++) {
      int[] key = {round, round + 1, round + 2};
      RadixTree.Insert<Integer> ins = tree.insert(key, ints(0, 3));
      tree.matchPrefix(t(round, round + 1, 999)); // split, so two ids per round
      maxId = Math.max(maxId, ins.node());
      for (int id : tree.children(ROOT)) {
        maxId = Math.max(maxId, id);
        for (int c : tree.children(id)) {
          maxId = Math.max(maxId, c);
        }
      }
      assertThat(tree.evict(3, v -> {})).isGreaterThanOrEqualTo(3);
    }
    assertThat(maxId).isLessThan(5);
    assertThat(tree.nodeCount()).isLessThan(5);
    tree.checkInvariants();
  }

  @Test
  void evictFreesWholeLeavesOldestFirst() {
    RadixTree<Integer> tree = new RadixTree<>(1);
    tree.insert(t(1, 1, 1), List.of(1, 2, 3));
    tree.insert(t(2, 2), List.of(4, 5));
    tree.insert(t(3, 3, 3, 3), List.of(6, 7, 8, 9));
    tree.insert(t(4), List.of(10));

    List<Integer> out = new ArrayList<>();
    assertThat(tree.evict(0, out::add)).isZero();
    assertThat(out).isEmpty();
    assertThat(tree.evict(1, out::add)).isEqualTo(3); // a whole leaf, even for n = 1
    assertThat(out).containsExactly(1, 2, 3);
    out.clear();
    assertThat(tree.evict(3, out::add)).isEqualTo(6); // 2 < 3, so one more leaf; then stop
    assertThat(out).containsExactly(4, 5, 6, 7, 8, 9);
    assertThat(tree.size()).isEqualTo(1);
    out.clear();
    assertThat(tree.evict(5, out::add)).isEqualTo(1); // the list runs dry
    assertThat(out).containsExactly(10);
    assertThat(tree.isEmpty()).isTrue();
    assertThat(tree.nodeCount()).isZero();
    assertThat(tree.lruOrder()).isEmpty();
    tree.checkInvariants();
  }
}
