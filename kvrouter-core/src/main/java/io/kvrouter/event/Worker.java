package io.kvrouter.event;

/**
 * One data-parallel rank of one worker: the unit whose cached blocks the index tracks and scores
 * (Dynamo's WorkerWithDpRank). Worker ids are unsigned 64-bit values.
 */
public record Worker(long workerId, int dpRank) implements Comparable<Worker> {
  public Worker {
    if (dpRank < 0) {
      throw new IllegalArgumentException("dpRank must be >= 0, got " + dpRank);
    }
  }

  /** Rank 0 of {@code workerId}. */
  public static Worker of(long workerId) {
    return new Worker(workerId, 0);
  }

  @Override
  public int compareTo(Worker o) {
    int c = Long.compareUnsigned(workerId, o.workerId);
    return c != 0 ? c : Integer.compare(dpRank, o.dpRank);
  }

  @Override
  public String toString() {
    return dpRank == 0
        ? Long.toUnsignedString(workerId)
        : Long.toUnsignedString(workerId) + ":" + dpRank;
  }
}
