package io.kvrouter.index;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.SequenceHasher;
import java.lang.reflect.Method;
import java.util.Arrays;
import java.util.List;
import kotlin.Unit;
import org.jetbrains.kotlinx.lincheck.Actor;
import org.jetbrains.kotlinx.lincheck.execution.ExecutionScenario;
import org.jetbrains.lincheck.datastructures.DSLScenarioBuilder;
import org.jetbrains.lincheck.datastructures.IntGen;
import org.jetbrains.lincheck.datastructures.ModelCheckingOptions;
import org.jetbrains.lincheck.datastructures.Operation;
import org.jetbrains.lincheck.datastructures.Param;
import org.junit.jupiter.api.Test;

/**
 * Lincheck: single-block stores and removes on a three-block path (holes included), clears, and
 * each worker rank's score are linearizable on the concurrent radix tree (docs/concurrency.md).
 * Subclasses run the same scenarios on the other concurrent kinds.
 *
 * <pre>
 * Implementation notes
 *
 * Workers: two worker ids, each with dp ranks 0 and 1 (four ranks). Every kind here takes
 * writers on any thread (they take turns on the writers' lock), so any operation, write or
 * read, may run on either thread: writes of different ranks interleave with reads, and with
 * each other as the lock lets them.
 * Reads: score(worker, rank) is one rank's score from one findMatches call. That is what the
 * index promises (each rank's score at one instant of the call); the scores of several ranks in
 * one answer may come from different instants (CrossWorkerReadLincheckTest shows the
 * interleaving).
 * Scenarios: model checking explores random scenarios (2 threads x 3 operations after up to 5
 * sequential ones) plus CUSTOM, hand-written scenarios it explores on every run whatever the
 * budget, each for 100 interleavings (200 under -Pthorough): a clear and a hole-making remove
 * racing a read of the same rank (the two bugs Lincheck found before the version check
 * existed), a hole filled again, and writes of the other ranks between two reads of one. With
 * four ranks a random scenario seldom builds a chain for the rank it reads, so the custom ones
 * carry the known cases: a clear applied block by block passes 40 random scenarios and fails the
 * first custom one. Stress runs random scenarios of 2 x 5 operations, 200 times each, on real
 * threads: what the model checker's sequentially consistent memory cannot show (missing
 * release/acquire pairs under the JIT); five operations a thread, because an invocation costs
 * mostly its fixed set-up and hand-over of the threads. The single-threaded radixTree() fails
 * both modes here.
 * Budget (LincheckRuns, docs/testing.md): 3 random scenarios of model checking and 10 of stress
 * by default, 100 of each under -Pthorough; the custom scenarios run in both forms, and the
 * short form still fails a clear applied block by block (at 50 interleavings already).
 * </pre>
 */
@Param(name = "worker", gen = IntGen.class, conf = "0:1")
@Param(name = "rank", gen = IntGen.class, conf = "0:1")
@Param(name = "pos", gen = IntGen.class, conf = "0:2")
@SuppressWarnings("this-escape") // newIndex() in a field initializer: subclasses only pick a kind
public class ConcurrentRadixTreeLincheckTest {
  static final long[] PATH = {11, 12, 13};
  static final long[] SEQ = SequenceHasher.sequenceHashes(PATH);

  private final KvIndex index = newIndex();

  protected KvIndex newIndex() {
    return KvIndexes.concurrentRadixTree();
  }

  static RouterEvent storeEvent(int worker, int rank, int pos) {
    long[] s = {SEQ[pos]};
    long[] l = {PATH[pos]};
    return new RouterEvent(
        new Worker(worker, rank),
        0,
        pos == 0 ? CacheEvent.storedAtRoot(s, l) : CacheEvent.stored(SEQ[pos - 1], s, l));
  }

  @Operation
  public void store(
      @Param(name = "worker") int worker,
      @Param(name = "rank") int rank,
      @Param(name = "pos") int pos) {
    index.apply(storeEvent(worker, rank, pos));
  }

  @Operation
  public void remove(
      @Param(name = "worker") int worker,
      @Param(name = "rank") int rank,
      @Param(name = "pos") int pos) {
    index.apply(new RouterEvent(new Worker(worker, rank), 0, CacheEvent.removed(SEQ[pos])));
  }

  @Operation
  public void clear(@Param(name = "worker") int worker, @Param(name = "rank") int rank) {
    index.apply(new RouterEvent(new Worker(worker, rank), 0, CacheEvent.cleared()));
  }

  @Operation
  public int score(@Param(name = "worker") int worker, @Param(name = "rank") int rank) {
    return index.findMatches(PATH, false).score(new Worker(worker, rank));
  }

  // ------------------------------------------------------------------ hand-written scenarios

  /** An operation of this class with its arguments, for a hand-written scenario. */
  static Actor op(Class<?> testClass, String name, Object... args) {
    for (Method m : testClass.getMethods()) {
      if (m.getName().equals(name) && m.getParameterCount() == args.length) {
        return new Actor(m, Arrays.asList(args));
      }
    }
    throw new IllegalArgumentException("no operation " + name + "/" + args.length);
  }

  private static Actor op(String name, Object... args) {
    return op(ConcurrentRadixTreeLincheckTest.class, name, args);
  }

  /** {@code initial} run alone, then {@code first} and {@code second} on two threads. */
  static ExecutionScenario scenario(List<Actor> initial, List<Actor> first, List<Actor> second) {
    DSLScenarioBuilder b = new DSLScenarioBuilder();
    b.initial(
        t -> {
          t.addAll(initial);
          return Unit.INSTANCE;
        });
    b.parallel(
        p -> {
          p.thread(
              t -> {
                t.addAll(first);
                return Unit.INSTANCE;
              });
          p.thread(
              t -> {
                t.addAll(second);
                return Unit.INSTANCE;
              });
          return Unit.INSTANCE;
        });
    return b.buildScenario();
  }

  /** Rank (0, 0) holds the whole path. */
  private static List<Actor> wholePath() {
    return List.of(op("store", 0, 0, 0), op("store", 0, 0, 1), op("store", 0, 0, 2));
  }

  static final List<ExecutionScenario> CUSTOM =
      List.of(
          // a clear of three blocks is one step: 3 or 0, never 2 or 1
          scenario(wholePath(), List.of(op("score", 0, 0)), List.of(op("clear", 0, 0))),
          // removing the first block makes a hole (3 -> 0 at once); storing it again fills it
          scenario(
              wholePath(),
              List.of(op("score", 0, 0), op("score", 0, 0)),
              List.of(op("remove", 0, 0, 0), op("store", 0, 0, 0))),
          // the other ranks' writes (same worker id, other worker, holes) between two reads
          scenario(
              List.of(
                  op("store", 0, 0, 0),
                  op("store", 0, 0, 1),
                  op("store", 0, 1, 0),
                  op("store", 1, 1, 0),
                  op("store", 1, 1, 1)),
              List.of(op("score", 0, 1), op("score", 1, 1)),
              List.of(op("store", 0, 1, 1), op("remove", 1, 1, 0), op("remove", 0, 0, 0))));

  static ModelCheckingOptions withCustomScenarios(ModelCheckingOptions o) {
    for (ExecutionScenario s : CUSTOM) o.addCustomScenario(s);
    return o;
  }

  @Test
  void modelChecking() {
    withCustomScenarios(LincheckRuns.modelChecking())
        .iterations(LincheckRuns.MODEL_CHECKING_ITERATIONS)
        .invocationsPerIteration(LincheckRuns.MODEL_CHECKING_INVOCATIONS)
        .threads(2)
        .actorsPerThread(3)
        .check(getClass());
  }

  @Test
  void stress() {
    LincheckRuns.stress()
        .iterations(LincheckRuns.STRESS_ITERATIONS)
        .invocationsPerIteration(200)
        .threads(2)
        .actorsPerThread(5)
        .check(getClass());
  }
}
