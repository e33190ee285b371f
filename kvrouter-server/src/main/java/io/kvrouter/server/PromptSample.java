package io.kvrouter.server;

import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.function.ObjIntConsumer;

/**
 * A few recent prompts of one index, for {@code GET /dashboard}'s hottest shared prefixes: request
 * threads offer the prompts they route, the dashboard's sampler takes them out.
 *
 * <pre>
 * Implementation notes
 *
 * Data: SLOTS fixed slots, each an int[MAX_TOKENS] made once with this object, a length, and a
 * state in an AtomicIntegerArray: FREE, WRITING, FULL, READING. Nothing grows with what clients
 * send: a prompt longer than MAX_TOKENS keeps its first MAX_TOKENS tokens.
 *
 * Who writes: any request thread (offer, the hot path of /route and of the gateway's requests):
 * from a random slot on (ThreadLocalRandom: no shared counter to contend on) it takes the first
 * FREE slot whose CAS to WRITING it wins, copies the tokens in and publishes FULL (a volatile
 * write, after the copy). With no free slot the prompt is not sampled. No lock, no allocation,
 * no boxing; a full sample costs SLOTS volatile reads. SLOTS is a power of two.
 *
 * Who reads: the dashboard's sampler thread only (drain): a FULL slot is CAS'd to READING, handed
 * to the consumer, then set FREE. Writers never touch a slot that is not FREE, so the consumer
 * reads a slot no one writes. The sample is thus at most SLOTS prompts per sampler tick, taken
 * from whichever requests found a free slot: a sample, not a count.
 * </pre>
 */
final class PromptSample {
  static final int SLOTS = 8;
  static final int MAX_TOKENS = 4096;
  private static final int FREE = 0;
  private static final int WRITING = 1;
  private static final int FULL = 2;
  private static final int READING = 3;

  private final int[][] tokens = new int[SLOTS][MAX_TOKENS];
  private final int[] lengths = new int[SLOTS];
  private final AtomicIntegerArray states = new AtomicIntegerArray(SLOTS);

  /** Offers a routed prompt: kept in the first free slot from a random one on, else dropped. */
  void offer(int[] prompt) {
    int start = ThreadLocalRandom.current().nextInt(SLOTS);
    for (int k = 0; k < SLOTS; k++) {
      int i = (start + k) & (SLOTS - 1);
      if (states.get(i) == FREE && states.compareAndSet(i, FREE, WRITING)) {
        write(i, prompt);
        return;
      }
    }
  }

  private void write(int i, int[] prompt) {
    int n = Math.min(prompt.length, MAX_TOKENS);
    System.arraycopy(prompt, 0, tokens[i], 0, n);
    lengths[i] = n;
    states.set(i, FULL);
  }

  /**
   * Hands every sampled prompt to {@code consumer} (its token array, valid only during the call,
   * and its length) and frees its slot. The sampler's thread only.
   */
  void drain(ObjIntConsumer<int[]> consumer) {
    for (int i = 0; i < SLOTS; i++) {
      if (!states.compareAndSet(i, FULL, READING)) continue;
      try {
        consumer.accept(tokens[i], lengths[i]);
      } finally {
        states.set(i, FREE);
      }
    }
  }
}
