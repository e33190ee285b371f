package io.kvrouter.transport.json;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Malformed input is rejected with an {@link EventDecodeException} that names the field and the
 * line and column, for string and byte input alike.
 */
class RouterEventJsonMalformedTest {

  /** One malformed document, the path its error must name, and a fragment of the message. */
  record Case(String name, String json, String path, String problem) {
    @Override
    public String toString() {
      return name;
    }
  }

  private static final String BLOCK = "{\"block_hash\":1,\"tokens_hash\":2}";

  /** A well-formed event around {@code data}. */
  private static String withData(String data) {
    return "{\"worker_id\":1,\"event\":{\"event_id\":7,\"data\":" + data + ",\"dp_rank\":0}}";
  }

  private static String withStored(String stored) {
    return withData("{\"stored\":" + stored + "}");
  }

  private static String withBlocks(String blocks) {
    return withStored("{\"parent_hash\":null,\"blocks\":" + blocks + "}");
  }

  static List<Case> cases() {
    return List.of(
        // the envelope
        new Case("empty input", "", "$", "expected an event object, found end of input"),
        new Case("root is an array", "[]", "$", "expected an event object, found an array"),
        new Case("root is a number", "42", "$", "found the integer 42"),
        new Case(
            "worker_id is a string",
            "{\"worker_id\":\"1\",\"event\":{\"event_id\":7,\"data\":\"cleared\"}}",
            "worker_id",
            "expected an unsigned 64-bit integer, found the string \"1\""),
        new Case(
            "worker_id missing",
            "{\"event\":{\"event_id\":7,\"data\":\"cleared\"}}",
            "worker_id",
            "missing required field"),
        new Case(
            "worker_id twice",
            "{\"worker_id\":1,\"worker_id\":2,\"event\":{\"event_id\":7,\"data\":\"cleared\"}}",
            "worker_id",
            "duplicate field"),
        new Case(
            "worker_id beyond 2^64-1",
            "{\"worker_id\":18446744073709551616,\"event\":{\"event_id\":7,\"data\":\"cleared\"}}",
            "worker_id",
            "integer 18446744073709551616 is outside the 64-bit range"),
        new Case("event missing", "{\"worker_id\":1}", "event", "missing required field"),
        new Case(
            "event is an array",
            "{\"worker_id\":1,\"event\":[]}",
            "event",
            "expected an object with event_id and data, found an array"),
        new Case(
            "event is null",
            "{\"worker_id\":1,\"event\":null}",
            "event",
            "expected an object with event_id and data, found null"),
        new Case(
            "event_id is a float",
            "{\"worker_id\":1,\"event\":{\"event_id\":7.0,\"data\":\"cleared\"}}",
            "event.event_id",
            "found the non-integer number 7.0"),
        new Case(
            "event_id in exponent form",
            "{\"worker_id\":1,\"event\":{\"event_id\":7e2,\"data\":\"cleared\"}}",
            "event.event_id",
            "found the non-integer number 7e2"),
        new Case(
            "event_id missing",
            "{\"worker_id\":1,\"event\":{\"data\":\"cleared\"}}",
            "event.event_id",
            "missing required field"),
        new Case(
            "data missing",
            "{\"worker_id\":1,\"event\":{\"event_id\":7}}",
            "event.data",
            "missing required field"),
        new Case(
            "dp_rank negative",
            "{\"worker_id\":1,\"event\":{\"event_id\":7,\"data\":\"cleared\",\"dp_rank\":-1}}",
            "event.dp_rank",
            "dp_rank must be in 0..2147483647, found -1"),
        new Case(
            "dp_rank beyond int",
            "{\"worker_id\":1,\"event\":{\"event_id\":7,\"data\":\"cleared\",\"dp_rank\":2147483648}}",
            "event.dp_rank",
            "dp_rank must be in 0..2147483647"),
        new Case(
            "dp_rank is a string",
            "{\"worker_id\":1,\"event\":{\"event_id\":7,\"data\":\"cleared\",\"dp_rank\":\"0\"}}",
            "event.dp_rank",
            "found the string \"0\""),
        new Case(
            "top-level dp_rank contradicts event.dp_rank",
            "{\"worker_id\":1,\"dp_rank\":1,\"event\":{\"event_id\":7,\"data\":\"cleared\","
                + "\"dp_rank\":2}}",
            "dp_rank",
            "top-level dp_rank 1 contradicts event.dp_rank 2"),
        // data
        new Case(
            "data is an unknown string",
            withData("\"stored\""),
            "event.data",
            "expected \"cleared\" or an object with one of stored, removed, cleared; found the"
                + " string \"stored\""),
        new Case("data is a number", withData("3"), "event.data", "found the integer 3"),
        new Case("data is empty", withData("{}"), "event.data", "found none"),
        new Case(
            "data holds only an unknown kind",
            withData("{\"moved\":{\"block_hashes\":[1]}}"),
            "event.data",
            "expected one of stored, removed, cleared; found none"),
        new Case(
            "data holds two kinds",
            withData(
                "{\"stored\":{\"blocks\":[" + BLOCK + "]},\"removed\":{\"block_hashes\":[1]}}"),
            "event.data.removed",
            "more than one of stored, removed, cleared"),
        new Case(
            "cleared object with a value",
            withData("{\"cleared\":1}"),
            "event.data.cleared",
            "expected null (cleared carries no data), found the integer 1"),
        // stored
        new Case(
            "stored is a string",
            withStored("\"x\""),
            "event.data.stored",
            "expected an object with parent_hash and blocks, found the string \"x\""),
        new Case(
            "stored without blocks",
            withStored("{\"parent_hash\":null}"),
            "event.data.stored.blocks",
            "missing required field"),
        new Case(
            "stored with an empty blocks list",
            withBlocks("[]"),
            "event.data.stored.blocks",
            "a stored event needs at least one block; found an empty list"),
        new Case(
            "blocks is an object",
            withBlocks(BLOCK),
            "event.data.stored.blocks",
            "expected an array of blocks, found an object"),
        new Case(
            "blocks null",
            withBlocks("null"),
            "event.data.stored.blocks",
            "expected an array of blocks, found null"),
        new Case(
            "a block is a number",
            withBlocks("[" + BLOCK + ",5]"),
            "event.data.stored.blocks[1]",
            "expected a block object with block_hash and tokens_hash, found the integer 5"),
        new Case(
            "parent_hash is a string",
            withStored("{\"parent_hash\":\"12\",\"blocks\":[" + BLOCK + "]}"),
            "event.data.stored.parent_hash",
            "found the string \"12\""),
        new Case(
            "parent_hash below -2^63",
            withStored("{\"parent_hash\":-9223372036854775809,\"blocks\":[" + BLOCK + "]}"),
            "event.data.stored.parent_hash",
            "integer -9223372036854775809 is outside the 64-bit range"),
        new Case(
            "parent_hash a float",
            withStored("{\"parent_hash\":1.5,\"blocks\":[" + BLOCK + "]}"),
            "event.data.stored.parent_hash",
            "found the non-integer number 1.5"),
        new Case(
            "block_hash beyond 2^64-1",
            withBlocks("[{\"block_hash\":18446744073709551616,\"tokens_hash\":2}]"),
            "event.data.stored.blocks[0].block_hash",
            "integer 18446744073709551616 is outside the 64-bit range"),
        new Case(
            "block_hash far beyond 64 bits",
            withBlocks("[{\"block_hash\":123456789012345678901234567890,\"tokens_hash\":2}]"),
            "event.data.stored.blocks[0].block_hash",
            "is outside the 64-bit range"),
        new Case(
            "block_hash null",
            withBlocks("[{\"block_hash\":null,\"tokens_hash\":2}]"),
            "event.data.stored.blocks[0].block_hash",
            "expected an unsigned 64-bit integer, found null"),
        new Case(
            "block_hash twice",
            withBlocks("[{\"block_hash\":1,\"block_hash\":1,\"tokens_hash\":2}]"),
            "event.data.stored.blocks[0].block_hash",
            "duplicate field"),
        new Case(
            "second block without tokens_hash",
            withBlocks("[" + BLOCK + ",{\"block_hash\":3,\"mm_extra_info\":null}]"),
            "event.data.stored.blocks[1].tokens_hash",
            "missing required field"),
        new Case(
            "second block's tokens_hash a float",
            withBlocks("[" + BLOCK + ",{\"block_hash\":3,\"tokens_hash\":1.5}]"),
            "event.data.stored.blocks[1].tokens_hash",
            "found the non-integer number 1.5"),
        new Case(
            "tokens_hash a boolean",
            withBlocks("[{\"block_hash\":3,\"tokens_hash\":true}]"),
            "event.data.stored.blocks[0].tokens_hash",
            "found true"),
        new Case(
            "tokens_hash an array",
            withBlocks("[{\"block_hash\":3,\"tokens_hash\":[1]}]"),
            "event.data.stored.blocks[0].tokens_hash",
            "found an array"),
        // removed
        new Case(
            "removed without block_hashes",
            withData("{\"removed\":{\"hashes\":[1]}}"),
            "event.data.removed.block_hashes",
            "missing required field"),
        new Case(
            "removed block_hashes is a number",
            withData("{\"removed\":{\"block_hashes\":1}}"),
            "event.data.removed.block_hashes",
            "expected an array of unsigned 64-bit integers, found the integer 1"),
        new Case(
            "removed block_hashes twice",
            withData("{\"removed\":{\"block_hashes\":[1],\"block_hashes\":[2]}}"),
            "event.data.removed.block_hashes",
            "duplicate field"),
        new Case(
            "removed hash a string",
            withData("{\"removed\":{\"block_hashes\":[1,2,\"3\"]}}"),
            "event.data.removed.block_hashes[2]",
            "found the string \"3\""),
        new Case(
            "removed hash beyond 64 bits",
            withData("{\"removed\":{\"block_hashes\":[1,99999999999999999999]}}"),
            "event.data.removed.block_hashes[1]",
            "is outside the 64-bit range"),
        new Case(
            "removed is an array",
            withData("{\"removed\":[1]}"),
            "event.data.removed",
            "expected an object with block_hashes, found an array"),
        // syntax: truncation, garbage, trailing content
        new Case(
            "truncated inside a block",
            "{\"worker_id\":1,\"event\":{\"event_id\":7,\"data\":{\"stored\":{\"blocks\":"
                + "[{\"block_hash\":42,",
            "event.data.stored.blocks[0].block_hash",
            "malformed JSON: Unexpected end-of-input"),
        new Case(
            "truncated inside a number at the end",
            "{\"worker_id\":1,\"event\":{\"event_id\":7",
            "event.event_id",
            "malformed JSON: Unexpected end-of-input"),
        new Case(
            "truncated inside an unknown field's value",
            "{\"worker_id\":1,\"extra\":{\"a\":[1,2",
            "extra.a[1]",
            "malformed JSON: Unexpected end-of-input: expected close marker for Array (start"
                + " marker at [line: 1, column: 29])"),
        new Case(
            "double comma",
            "{\"worker_id\":1,,\"event\":{}}",
            "worker_id",
            "malformed JSON: Unexpected character"),
        new Case("not JSON at all", "nope", "$", "malformed JSON"),
        new Case(
            "unquoted field name", "{worker_id:1}", "$", "malformed JSON: Unexpected character"),
        new Case(
            "a second document after the event",
            withData("\"cleared\"") + " " + withData("\"cleared\""),
            "$",
            "expected the end of the input, found an object"),
        new Case(
            "a stray closing brace after the event",
            withData("\"cleared\"") + "}",
            "$",
            "malformed JSON: Unexpected close marker"));
  }

  private static void assertNamesFieldAndPosition(EventDecodeException e, Case c) {
    assertThat(e).as(c.name()).isNotNull();
    assertThat(e.path()).as("path of %s: %s", c.name(), e.getMessage()).isEqualTo(c.path());
    assertThat(e.getMessage())
        .as(c.name())
        .startsWith(c.path() + ": ")
        .contains(c.problem())
        .containsPattern("\\(at line \\d+, column \\d+\\)$");
    assertThat(e.line()).as(c.name()).isPositive();
    assertThat(e.column()).as(c.name()).isPositive();
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("cases")
  void rejectedFromAString(Case c) {
    EventDecodeException e =
        catchThrowableOfType(EventDecodeException.class, () -> RouterEventJson.readEvent(c.json()));
    assertNamesFieldAndPosition(e, c);
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("cases")
  void rejectedFromBytes(Case c) {
    EventDecodeException e =
        catchThrowableOfType(
            EventDecodeException.class,
            () -> RouterEventJson.readEvent(c.json().getBytes(StandardCharsets.UTF_8)));
    assertNamesFieldAndPosition(e, c);
  }

  /**
   * The cases whose fault lies inside the event and stays there when the event is followed by more
   * input (root-level faults and truncation mean something else inside an array).
   */
  static List<Case> elementCases() {
    return cases().stream()
        .filter(c -> !c.path().equals("$") && !c.problem().contains("end-of-input"))
        .toList();
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("elementCases")
  void rejectedAsTheSecondElementOfAnArray(Case c) {
    String json = "[" + withData("\"cleared\"") + ",\n" + c.json() + "]";

    EventDecodeException e =
        catchThrowableOfType(EventDecodeException.class, () -> RouterEventJson.readEvents(json));

    assertThat(e).as(c.name()).isNotNull();
    String expected = "[1]." + c.path();
    assertThat(e.path()).as("%s: %s", c.name(), e.getMessage()).isEqualTo(expected);
    assertThat(e.getMessage()).as(c.name()).contains(c.problem());
    assertThat(e.line()).as("the bad element is on line 2").isEqualTo(2);
  }

  @Test
  void positionPointsAtTheOffendingToken() {
    String json =
        """
        {
          "worker_id": 1,
          "event": {
            "event_id": 7,
            "data": {"stored": {"parent_hash": null, "blocks": [
              {"block_hash": 1, "tokens_hash": 2},
              {"block_hash": 3, "tokens_hash": 4.5}
            ]}}
          }
        }
        """;

    EventDecodeException e =
        catchThrowableOfType(EventDecodeException.class, () -> RouterEventJson.readEvent(json));

    assertThat(e.path()).isEqualTo("event.data.stored.blocks[1].tokens_hash");
    assertThat(e.line()).isEqualTo(7);
    assertThat(e.column()).isEqualTo(json.lines().toList().get(6).indexOf("4.5") + 1);
    assertThat(e.getMessage())
        .isEqualTo(
            "event.data.stored.blocks[1].tokens_hash: expected an unsigned 64-bit integer, found"
                + " the non-integer number 4.5 (at line 7, column "
                + e.column()
                + ")");
  }

  @Test
  void aBadElementRejectsTheWholeArray() {
    String good = withData("\"cleared\"");
    String json = "[" + good + "," + good + "," + withBlocks("[]") + "," + good + "]";

    assertThatThrownBy(() -> RouterEventJson.readEvents(json))
        .isInstanceOf(EventDecodeException.class)
        .hasMessageStartingWith("[2].event.data.stored.blocks: a stored event needs at least");
  }

  @Test
  void readEventsRejectsANonArrayRoot() {
    assertThatThrownBy(() -> RouterEventJson.readEvents(withData("\"cleared\"")))
        .isInstanceOf(EventDecodeException.class)
        .hasMessageStartingWith("$: expected an array of events, found an object (at line 1,");
    assertThatThrownBy(() -> RouterEventJson.readEvents("[] []"))
        .isInstanceOf(EventDecodeException.class)
        .hasMessageStartingWith("$: expected the end of the input, found an array");
    assertThatThrownBy(() -> RouterEventJson.readEvents("[" + withData("\"cleared\"")))
        .isInstanceOf(EventDecodeException.class)
        .hasMessageContaining("Unexpected end-of-input");
  }
}
