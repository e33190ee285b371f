package io.kvrouter.index;

/**
 * The children of a {@link RunNode} once it has two or more, keyed by the local hash of their run's
 * first block.
 */
final class RunChildren extends KeyedChildren<RunNode> {
  private RunChildren(int capacity) {
    super(capacity);
  }

  static RunChildren of(RunNode first, RunNode second) {
    RunChildren t = new RunChildren(4);
    t.insertBoth(first, second);
    return t;
  }

  @Override
  long keyOf(RunNode node) {
    return node.first;
  }

  @Override
  RunChildren empty(int capacity) {
    return new RunChildren(capacity);
  }

  /** Adds {@code child}; returns this table or, when full, a grown copy that holds it. */
  RunChildren put(RunNode child) {
    return (RunChildren) putChild(child);
  }
}
