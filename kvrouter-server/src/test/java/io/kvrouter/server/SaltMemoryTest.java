package io.kvrouter.server;

import static io.kvrouter.server.HttpFixture.list;
import static io.kvrouter.server.HttpFixture.range;
import static io.kvrouter.server.HttpFixture.stored;
import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.Worker;
import io.kvrouter.hash.BlockHasher;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryMXBean;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * Client-controlled strings do not grow the server's memory: {@code /query} needs no token, and
 * every distinct {@code cache_salt} it is sent must be forgotten once answered. In CI: 2,000
 * distinct salts of 64 KiB (125 MiB if the server kept them, against a bound of 32 MiB). The
 * full-size run sends 10,000 salts of 100 KiB (1 GB; docs/service.md, "Security and limits"):
 * {@code ./mvnw -B -pl kvrouter-server -am test -Dtest=SaltMemoryTest
 * -Dsurefire.failIfNoSpecifiedTests=false -Dkvrouter.saltMemoryTest.salts=10000
 * -Dkvrouter.saltMemoryTest.chars=102400}
 */
class SaltMemoryTest {
  private static final int SALTS = Integer.getInteger("kvrouter.saltMemoryTest.salts", 2_000);
  private static final int SALT_CHARS =
      Integer.getInteger("kvrouter.saltMemoryTest.chars", 64 << 10);
  private static final long BOUND = 32L << 20;
  private static final int CLIENTS = 4;

  @Test
  void distinctLargeSaltsLeaveNoRetainedHeap() throws Exception {
    try (HttpFixture http = new HttpFixture()) {
      assertThat(http.register(1, 0, "m", 4).status()).isEqualTo(201);
      int target = SALTS / 2;
      // worker 1 cached the prompt under one of the salts: only that query may score
      String targetSalt = salt(target);
      assertThat(
              http.events(
                      "m",
                      list(
                          stored(
                              new Worker(1, 0),
                              0,
                              range(0, 8),
                              BlockHasher.of(4).withNamespace(targetSalt))))
                  .status())
          .isEqualTo(200);
      query(http, salt(0)); // warm up the request path before the first measurement

      long before = retainedHeap();
      AtomicInteger scored = new AtomicInteger();
      try (ExecutorService clients = Executors.newFixedThreadPool(CLIENTS)) {
        List<Future<?>> done = new ArrayList<>();
        for (int c = 0; c < CLIENTS; c++) {
          int first = c;
          done.add(
              clients.submit(
                  () -> {
                    for (int i = first; i < SALTS; i += CLIENTS) {
                      HttpFixture.Reply r = query(http, salt(i));
                      assertThat(r.status()).as(r.body()).isEqualTo(200);
                      if (!r.body().startsWith("{\"scores\":{}")) scored.incrementAndGet();
                    }
                    return null;
                  }));
        }
        for (Future<?> f : done) f.get();
      }
      long after = retainedHeap();
      System.out.printf(
          "SaltMemoryTest: %d salts of %d chars (%d MiB sent): retained heap %d -> %d bytes"
              + " (growth %d, bound %d)%n",
          SALTS,
          SALT_CHARS,
          ((long) SALTS * SALT_CHARS) >> 20,
          before,
          after,
          after - before,
          BOUND);
      assertThat(scored.get()).as("queries that matched the salted blocks").isEqualTo(1);
      assertThat(after - before).as("retained heap growth").isLessThan(BOUND);
    }
  }

  private static HttpFixture.Reply query(HttpFixture http, String salt) {
    return http.post(
        "/query",
        "{\"model_name\":\"m\",\"token_ids\":[0,1,2,3,4,5,6,7],\"cache_salt\":\"" + salt + "\"}");
  }

  /** A salt of SALT_CHARS characters, distinct for each {@code i}. */
  private static String salt(int i) {
    StringBuilder b = new StringBuilder(SALT_CHARS);
    b.append(i).append('-');
    while (b.length() < SALT_CHARS) b.append('s');
    return b.toString();
  }

  /** Heap in use after full collections (the server runs in this JVM). */
  private static long retainedHeap() {
    MemoryMXBean mem = ManagementFactory.getMemoryMXBean();
    long used = Long.MAX_VALUE;
    for (int i = 0; i < 3; i++) {
      mem.gc();
      used = Math.min(used, mem.getHeapMemoryUsage().getUsed());
    }
    return used;
  }
}
