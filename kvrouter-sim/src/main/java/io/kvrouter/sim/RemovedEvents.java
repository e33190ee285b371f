package io.kvrouter.sim;

/**
 * How the simulated engines publish an eviction: vLLM and SGLang name one block per removal event
 * (so does Dynamo's mocker); one event per eviction names all its blocks at once. The caches and
 * the index end the same either way; only the number of events differs.
 */
public enum RemovedEvents {
  /**
   * One Removed event per evicted block, each evicted leaf's deepest block first (vLLM's order;
   * SGLang lists a node's pages from the top).
   */
  PER_BLOCK("per-block"),
  /** One Removed event per eviction, naming every block it freed. */
  PER_EVICTION("per-eviction");

  private final String cliName;

  RemovedEvents(String cliName) {
    this.cliName = cliName;
  }

  public String cliName() {
    return cliName;
  }

  public boolean perBlock() {
    return this == PER_BLOCK;
  }

  /** The value of {@code --removed-events}; the message names the option and both values. */
  public static RemovedEvents parse(String value) {
    for (RemovedEvents r : values()) {
      if (r.cliName.equals(value)) return r;
    }
    throw new IllegalArgumentException(
        "--removed-events must be per-block or per-eviction, got '" + value + "'");
  }
}
