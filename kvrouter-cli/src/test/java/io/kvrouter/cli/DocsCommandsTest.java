package io.kvrouter.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.assertj.core.api.Assertions;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

/**
 * Every {@code ./kvrouter ...} command in a fenced code block of README.md and docs/*.md parses:
 * its subcommand exists, every option is one the command has, and every value converts to the
 * option's type. A renamed or removed flag therefore fails this test instead of rotting the docs.
 *
 * <p>How a command is found: code blocks are joined across backslash continuations, each occurrence
 * of {@code ./kvrouter } starts a command, which ends at the first unquoted {@code ;}, {@code &},
 * {@code |}, {@code )}, {@code #} or line end. Words are split as a POSIX shell does (single and
 * double quotes, backslash escapes, adjacent parts joined); a shell variable ({@code $i}, {@code
 * ${M}}, {@code $(...)}) stands for "1", enough for picocli to convert. Commands are parsed, never
 * run.
 */
class DocsCommandsTest {
  private static final Path ROOT = Path.of("..").toAbsolutePath().normalize();

  record Found(String where, List<String> args) {}

  @Test
  void everyDocumentedCommandParses() throws IOException {
    List<Found> found = new ArrayList<>();
    List<Path> files = new ArrayList<>();
    files.add(ROOT.resolve("README.md"));
    try (Stream<Path> docs = Files.list(ROOT.resolve("docs"))) {
      docs.filter(p -> p.toString().endsWith(".md")).sorted().forEach(files::add);
    }
    for (Path f : files) found.addAll(commands(f));
    List<String> failures = new ArrayList<>();
    for (Found c : found) {
      if (c.args().contains("...")) {
        failures.add(
            c.where() + ": kvrouter " + String.join(" ", c.args()) + "\n  '...' is no value");
        continue;
      }
      try {
        new CommandLine(new Main()).parseArgs(c.args().toArray(String[]::new));
      } catch (CommandLine.ParameterException e) {
        failures.add(
            c.where() + ": kvrouter " + String.join(" ", c.args()) + "\n  " + e.getMessage());
      }
    }
    // the README alone has more than ten commands: an extraction that finds few is broken
    assertThat(found).as("documented commands found").hasSizeGreaterThan(30);
    assertThat(failures).as("documented commands that do not parse").isEmpty();
  }

  @Test
  void theExtractionFindsARenamedFlag() {
    List<Found> ok =
        commandsIn("x.md", List.of("```bash", "./kvrouter serve --port 8090 &", "```"));
    List<Found> bad = commandsIn("x.md", List.of("```bash", "./kvrouter serve --prot 8090", "```"));
    assertThat(ok)
        .singleElement()
        .extracting(Found::args)
        .isEqualTo(List.of("serve", "--port", "8090"));
    assertThat(bad).hasSize(1);
    CommandLine cl = new CommandLine(new Main());
    Assertions.assertThatThrownBy(() -> cl.parseArgs(bad.get(0).args().toArray(String[]::new)))
        .isInstanceOf(CommandLine.ParameterException.class)
        .hasMessageContaining("--prot");
  }

  @Test
  void wordsSplitAsAShellSplitsThem() {
    List<Found> f =
        commandsIn(
            "x.md",
            List.of(
                "```bash",
                "for i in 1 2; do ./kvrouter mock-engine --port 810$i --kv-events-config \\",
                "  '{\"a\":\"tcp://*:55'$i'7\"}' & done",
                "```"));
    assertThat(f)
        .singleElement()
        .extracting(Found::args)
        .isEqualTo(
            List.of(
                "mock-engine", "--port", "8101", "--kv-events-config", "{\"a\":\"tcp://*:5517\"}"));
  }

  static List<Found> commands(Path file) throws IOException {
    return commandsIn(ROOT.relativize(file).toString(), Files.readAllLines(file));
  }

  static List<Found> commandsIn(String name, List<String> lines) {
    List<Found> out = new ArrayList<>();
    boolean in = false;
    StringBuilder joined = new StringBuilder();
    int startLine = 0;
    for (int n = 0; n < lines.size(); n++) {
      String line = lines.get(n);
      if (line.strip().startsWith("```")) {
        in = !in;
        continue;
      }
      if (!in) continue;
      if (joined.isEmpty()) startLine = n + 1;
      if (line.endsWith("\\")) {
        joined.append(line, 0, line.length() - 1).append(' ');
        continue;
      }
      joined.append(line);
      String text = joined.toString();
      joined.setLength(0);
      int at = 0;
      while ((at = text.indexOf("./kvrouter ", at)) >= 0) {
        List<String> words = words(text.substring(at + "./kvrouter ".length()));
        out.add(new Found(name + ":" + startLine, words));
        at += "./kvrouter ".length();
      }
    }
    return out;
  }

  /** Shell words up to the end of one simple command. */
  static List<String> words(String s) {
    List<String> words = new ArrayList<>();
    StringBuilder w = new StringBuilder();
    boolean inWord = false;
    int i = 0;
    while (i < s.length()) {
      char c = s.charAt(i);
      if (c == '\'') {
        int end = s.indexOf('\'', i + 1);
        if (end < 0) end = s.length();
        w.append(s, i + 1, end);
        inWord = true;
        i = end + 1;
      } else if (c == '"') {
        i++;
        while (i < s.length() && s.charAt(i) != '"') {
          char d = s.charAt(i);
          if (d == '\\' && i + 1 < s.length()) {
            w.append(s.charAt(i + 1));
            i += 2;
          } else if (d == '$') {
            i = variable(s, i, w);
          } else {
            w.append(d);
            i++;
          }
        }
        inWord = true;
        i++;
      } else if (c == '\\' && i + 1 < s.length()) {
        w.append(s.charAt(i + 1));
        inWord = true;
        i += 2;
      } else if (c == '$') {
        i = variable(s, i, w);
        inWord = true;
      } else if (c == ';' || c == '&' || c == '|' || c == ')' || c == '#' || c == '>' || c == '<') {
        break;
      } else if (Character.isWhitespace(c)) {
        if (inWord) words.add(w.toString());
        w.setLength(0);
        inWord = false;
        i++;
      } else {
        w.append(c);
        inWord = true;
        i++;
      }
    }
    if (inWord) words.add(w.toString());
    return words;
  }

  /**
   * Appends "1" for the variable or substitution at {@code s[i] == '$'}; returns the index after
   * it.
   */
  private static int variable(String s, int i, StringBuilder w) {
    int j = i + 1;
    if (j < s.length() && (s.charAt(j) == '{' || s.charAt(j) == '(')) {
      char close = s.charAt(j) == '{' ? '}' : ')';
      int depth = 0;
      for (; j < s.length(); j++) {
        char d = s.charAt(j);
        if (d == '(' || d == '{') depth++;
        if (d == close && --depth == 0) break;
      }
      j++;
    } else {
      while (j < s.length() && (Character.isLetterOrDigit(s.charAt(j)) || s.charAt(j) == '_')) j++;
    }
    w.append('1');
    return j;
  }
}
