package io.kvrouter.tokenize;

import java.util.Arrays;
import java.util.List;

/**
 * Finds a tokenizer's added tokens in a text the way Hugging Face {@code tokenizers} does before it
 * normalises anything, so that the text between them can be tokenized piece by piece.
 *
 * <pre>
 * Implementation notes
 *
 * The Rust core (AddedVocabulary::extract_and_normalize) splits the input in two passes, each a
 * leftmost-longest Aho-Corasick match: first on the added tokens with normalized=false, over the
 * raw text; then, inside each piece left over, on the tokens with normalized=true, over the
 * normalised piece. Each piece then goes through normalizer, pre-tokenizer and model on its own,
 * and nothing in those steps looks outside its piece (Tokenizer.segmentable checks the few
 * settings that would: lstrip/rstrip/single_word tokens and Metaspace prepend_scheme "first").
 * This class reproduces both passes with a character trie walked from each position (leftmost,
 * longest match at that position, then resume after it); pass two is used only when the
 * normalizer is the identity, otherwise the piece is handed to the Rust core whole and it does
 * pass two itself. Immutable after construction; safe from any thread.
 * </pre>
 */
final class AddedTokens {

  /** A trie node: its children by character, in parallel sorted arrays (no boxing per char). */
  private static final class Node {
    char[] keys = new char[0];
    Node[] children = new Node[0];
    int id = -1;

    Node next(char c) {
      int i = Arrays.binarySearch(keys, c);
      return i >= 0 ? children[i] : null;
    }

    Node nextOrNew(char c) {
      int i = Arrays.binarySearch(keys, c);
      if (i >= 0) return children[i];
      int at = -i - 1;
      char[] k = new char[keys.length + 1];
      Node[] n = new Node[keys.length + 1];
      System.arraycopy(keys, 0, k, 0, at);
      System.arraycopy(children, 0, n, 0, at);
      System.arraycopy(keys, at, k, at + 1, keys.length - at);
      System.arraycopy(children, at, n, at + 1, keys.length - at);
      k[at] = c;
      n[at] = new Node();
      keys = k;
      children = n;
      return n[at];
    }
  }

  /** One trie per pass; {@code second} is null when pass two is left to the Rust core. */
  private final Node first;

  private final Node second;
  private final boolean[] firstChar1 = new boolean[65536];
  private final boolean[] firstChar2 = new boolean[65536];

  /** A token as tokenizer.json's added_tokens lists it. */
  record Token(int id, String content, boolean normalized) {}

  AddedTokens(List<Token> tokens, boolean splitNormalized) {
    first = new Node();
    second = splitNormalized ? new Node() : null;
    for (Token t : tokens) {
      if (t.content().isEmpty()) {
        continue;
      }
      if (!t.normalized()) {
        insert(first, firstChar1, t);
      } else if (second != null) {
        insert(second, firstChar2, t);
      }
    }
  }

  private static void insert(Node root, boolean[] firstChar, Token t) {
    Node n = root;
    String s = t.content();
    firstChar[s.charAt(0)] = true;
    for (int i = 0; i < s.length(); i++) {
      n = n.nextOrNew(s.charAt(i));
    }
    if (n.id < 0) {
      n.id = t.id();
    }
  }

  /** Receives the pieces of a text in order. */
  interface Sink {
    /** Text between added tokens, {@code text.substring(start, end)}, never empty. */
    void text(String text, int start, int end);

    /** An added token's id. */
    void token(int id);
  }

  /** Splits {@code text} into pieces and added tokens, in order. */
  void split(String text, Sink sink) {
    split(text, 0, text.length(), first, firstChar1, sink, true);
  }

  private void split(
      String text, int from, int to, Node root, boolean[] firstChar, Sink sink, boolean pass1) {
    int pieceStart = from;
    int i = from;
    while (i < to) {
      char c = text.charAt(i);
      if (firstChar[c]) {
        int bestEnd = -1, bestId = -1;
        Node n = root;
        for (int j = i; j < to; j++) {
          n = n.next(text.charAt(j));
          if (n == null) {
            break;
          }
          if (n.id >= 0) {
            bestEnd = j + 1;
            bestId = n.id;
          }
        }
        if (bestEnd > 0) {
          if (pieceStart < i) {
            piece(text, pieceStart, i, sink, pass1);
          }
          sink.token(bestId);
          i = bestEnd;
          pieceStart = i;
          continue;
        }
      }
      i++;
    }
    if (pieceStart < to) {
      piece(text, pieceStart, to, sink, pass1);
    }
  }

  private void piece(String text, int start, int end, Sink sink, boolean pass1) {
    if (pass1 && second != null) {
      split(text, start, end, second, firstChar2, sink, false);
    } else {
      sink.text(text, start, end);
    }
  }
}
