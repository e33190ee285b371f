package io.kvrouter.index;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.SequenceHasher;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

/**
 * {@link TieredIndex} read while one writer moves a chain between the device and the host in vLLM's
 * write-through order (the host copy is stored before the device copy goes, and the device copy is
 * stored again before the host copy goes): since some tier holds every block at every moment, a
 * reader must always see the whole chain in the tiered overlap, and never more than the chain on
 * the device. Also: the first host event, arriving while device writes run on another thread, loses
 * none of them.
 */
class TieredConcurrencyTest {
  private static final Worker W = Worker.of(1);
  private static final int ROUNDS = 2_000;

  @Test
  void aBlockMovingBetweenTiersNeverLeavesTheTieredOverlap() throws Exception {
    for (Supplier<KvIndex> kind :
        List.<Supplier<KvIndex>>of(KvIndexes::concurrentRadixTree, () -> KvIndexes.positional(4))) {
      run(kind);
    }
  }

  private void run(Supplier<KvIndex> kind) throws Exception {
    long[] local = new Random(5).longs(8).toArray();
    long[] seq = SequenceHasher.sequenceHashes(local);
    TieredIndex t = TieredIndex.of(kind);
    RouterEvent store = new RouterEvent(W, 0, CacheEvent.storedAtRoot(seq, local));
    RouterEvent remove = new RouterEvent(W, 0, CacheEvent.removed(seq.clone()));
    t.apply(Tier.DEVICE, store);
    t.apply(Tier.HOST, store);
    AtomicBoolean done = new AtomicBoolean();
    AtomicLong reads = new AtomicLong();
    AtomicReference<String> bad = new AtomicReference<>();
    CountDownLatch started = new CountDownLatch(1);
    Thread reader =
        new Thread(
            () -> {
              started.countDown();
              while (!done.get()) {
                TieredScores s = t.findTiered(local);
                int p1 = s.blocks(W, Tier.DEVICE);
                int p4 = s.blocks(W, Tier.EXTERNAL);
                if (s.blocks(W, Tier.HOST) != 8 || p4 != 8 || p1 > 8) {
                  bad.compareAndSet(null, "P_1 " + p1 + " P_2 " + s.blocks(W, Tier.HOST));
                }
                reads.incrementAndGet();
              }
            });
    reader.start();
    started.await();
    for (int i = 0; i < ROUNDS; i++) {
      t.apply(Tier.DEVICE, remove); // the host holds them
      t.apply(Tier.DEVICE, store);
      t.apply(Tier.HOST, remove); // the device holds them
      t.apply(Tier.HOST, store);
    }
    done.set(true);
    reader.join();
    assertThat(bad.get()).as(kind.get().toString()).isNull();
    assertThat(reads.get()).isPositive();
    t.close();
  }

  /** A device index whose next apply waits, before applying, until the test lets it go. */
  private static final class HeldIndex extends ForwardingKvIndex {
    final CountDownLatch entered = new CountDownLatch(1);
    final CountDownLatch release = new CountDownLatch(1);

    HeldIndex() {
      super(KvIndexes.concurrentRadixTree());
    }

    @Override
    public void apply(RouterEvent event) {
      if (entered.getCount() > 0) {
        entered.countDown();
        try {
          release.await();
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }
      super.apply(event);
    }
  }

  @Test
  void theFirstHostEventLosesNoDeviceWriteInFlight() throws Exception {
    Random rnd = new Random(11);
    for (int trial = 0; trial < 30; trial++) {
      HeldIndex device = new HeldIndex();
      TieredIndex t = TieredIndex.over(device, KvIndexes::concurrentRadixTree);
      long[] local = {rnd.nextLong()};
      long[] seq = SequenceHasher.sequenceHashes(local);
      // a device write on the direct path, held inside the device index's apply
      Thread writer =
          new Thread(
              () ->
                  t.apply(Tier.DEVICE, new RouterEvent(W, 0, CacheEvent.storedAtRoot(seq, local))));
      writer.start();
      device.entered.await();
      long[] hl = {rnd.nextLong()};
      Thread host =
          new Thread(
              () ->
                  t.apply(
                      Tier.HOST,
                      new RouterEvent(
                          W, 0, CacheEvent.storedAtRoot(SequenceHasher.sequenceHashes(hl), hl))));
      host.start();
      while (!t.hasTiers()) Thread.onSpinWait(); // the host event started the activation
      device.release.countDown();
      writer.join();
      host.join();
      // the held write reached the cumulative index: a host child stored under it is accepted
      // there (its parent is held) and scores 2 with the host; removed from the device, only the
      // host child is left, which no longer connects
      long childLocal = rnd.nextLong();
      long child = SequenceHasher.next(seq[0], childLocal);
      t.apply(
          Tier.HOST,
          new RouterEvent(
              W, 0, CacheEvent.stored(seq[0], new long[] {child}, new long[] {childLocal})));
      long[] q = {local[0], childLocal};
      String at = "trial " + trial;
      assertThat(t.findTiered(q).blocks(W, Tier.DEVICE)).as(at).isEqualTo(1);
      assertThat(t.findTiered(q).blocks(W, Tier.HOST)).as(at).isEqualTo(2);
      t.apply(Tier.DEVICE, new RouterEvent(W, 0, CacheEvent.removed(seq)));
      assertThat(t.findTiered(q).blocks(W, Tier.EXTERNAL)).as(at + " removed").isZero();
      t.close();
    }
  }
}
