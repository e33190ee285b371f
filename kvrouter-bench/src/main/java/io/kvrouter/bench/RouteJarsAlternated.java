package io.kvrouter.bench;

import java.lang.reflect.Method;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.Path;
import java.util.Arrays;

/**
 * {@link RouteBenchmark}'s {@code route} (event mode) of two or more builds, alternated batch by
 * batch in one JVM and one thread, so that every build sees the same machine at nearly the same
 * moment: each jar is loaded by a class loader of its own (its router, index and hashing classes
 * with it), set up as the benchmark sets up, and then each round runs a batch of 2,000 routes of
 * every jar in turn (the order reversed every other round), timing each route alone (the free of
 * the request routed {@code 4 × workers} routes earlier runs untimed, as in the benchmark). Prints,
 * per jar, the minimum, 10th, 25th percentile and median over the rounds after the first fifth of
 * the batch means, in ns per route. On a shared machine the minimum is the batch least disturbed by
 * other processes, the figure closest to a quiet core's; the ratio of two jars' minima is the
 * comparison. Each timed route includes one {@code System.nanoTime} pair (about 40 ns on a
 * kvm-clock VM), the same for every jar.
 *
 * <pre>
 * java -cp kvrouter-bench/target/benchmarks.jar io.kvrouter.bench.RouteJarsAlternated \
 *     256 300 /tmp/before.jar /tmp/after.jar
 * </pre>
 *
 * Arguments: workers (as RouteBenchmark's parameter), rounds, then the jars (benchmarks.jar of each
 * build: any build whose RouteBenchmark has {@code routeOne} and {@code freeOldest}).
 */
public final class RouteJarsAlternated {
  private static final int BATCH = 2_000;

  private RouteJarsAlternated() {}

  public static void main(String[] args) throws Exception {
    if (args.length < 3) {
      throw new IllegalArgumentException("usage: RouteJarsAlternated WORKERS ROUNDS JAR...");
    }
    final int workers = Integer.parseInt(args[0]);
    final int rounds = Integer.parseInt(args[1]);
    if (rounds < 5) throw new IllegalArgumentException("rounds must be >= 5, got " + rounds);
    final int n = args.length - 2;
    final Object[] bench = new Object[n];
    final Method[] route = new Method[n];
    final Method[] free = new Method[n];
    for (int j = 0; j < n; j++) {
      final URL jar = Path.of(args[2 + j]).toUri().toURL();
      final URLClassLoader loader =
          new URLClassLoader(new URL[] {jar}, ClassLoader.getPlatformClassLoader());
      final Class<?> c = loader.loadClass(RouteBenchmark.class.getName());
      final Object b = c.getConstructor().newInstance();
      c.getField("workers").setInt(b, workers);
      c.getField("mode").set(b, "events");
      c.getMethod("setUp").invoke(b);
      route[j] = c.getDeclaredMethod("routeOne");
      route[j].setAccessible(true);
      free[j] = c.getDeclaredMethod("freeOldest");
      free[j].setAccessible(true);
      bench[j] = b;
    }
    final long[][] mean = new long[n][rounds];
    int sink = 0;
    for (int round = 0; round < rounds; round++) {
      for (int jj = 0; jj < n; jj++) {
        final int j = (round & 1) == 0 ? jj : n - 1 - jj;
        long total = 0;
        for (int k = 0; k < BATCH; k++) {
          final long t0 = System.nanoTime();
          final Object d = route[j].invoke(bench[j]);
          total += System.nanoTime() - t0;
          if (d == null) sink++;
          free[j].invoke(bench[j]);
        }
        mean[j][round] = total / BATCH;
      }
    }
    for (int j = 0; j < n; j++) {
      final long[] v = Arrays.copyOfRange(mean[j], rounds / 5, rounds);
      Arrays.sort(v);
      System.out.printf(
          "%s workers=%d min %d p10 %d p25 %d median %d ns/route%n",
          args[2 + j], workers, v[0], v[v.length / 10], v[v.length / 4], v[v.length / 2]);
    }
    if (sink > 0) System.out.println(sink + " routes answered null");
  }
}
