package io.kvrouter.index;

/** The children of a {@link TreeNode} once it has two or more, keyed by their local hash. */
final class ChildTable extends KeyedChildren<TreeNode> {
  private ChildTable(int capacity) {
    super(capacity);
  }

  static ChildTable of(TreeNode first, TreeNode second) {
    ChildTable t = new ChildTable(4);
    t.insertBoth(first, second);
    return t;
  }

  @Override
  long keyOf(TreeNode node) {
    return node.local;
  }

  @Override
  ChildTable empty(int capacity) {
    return new ChildTable(capacity);
  }

  /** Adds {@code child}; returns this table or, when full, a grown copy that holds it. */
  ChildTable put(TreeNode child) {
    return (ChildTable) putChild(child);
  }
}
