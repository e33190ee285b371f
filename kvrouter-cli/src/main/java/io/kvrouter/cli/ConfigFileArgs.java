package io.kvrouter.cli;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import java.util.TreeSet;
import java.util.function.Supplier;
import picocli.CommandLine;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Model.OptionSpec;

/**
 * The {@code --config FILE} of {@code kvrouter serve} and {@code kvrouter gateway}: a properties
 * file of long flag names without dashes ({@code port=8091}) turned into arguments, followed by the
 * command line's own flags so that they win, and parsed again into a fresh command. Stateless.
 */
public final class ConfigFileArgs {
  private ConfigFileArgs() {}

  /** What a command runs once its flags (and its --config file's) are parsed. */
  @FunctionalInterface
  public interface Body<T> {
    /** The exit code of running {@code command}. */
    int run(T command, PrintWriter out, PrintWriter err) throws Exception;
  }

  /**
   * A command's {@code call()}: {@code body} on {@code self} when {@code config} is null, else on
   * the command {@link #reparse} makes of the file and the command line; 2 (after printing why)
   * when the file is unreadable or names an unknown flag or a bad value.
   */
  public static <T> int call(
      CommandSpec spec,
      T self,
      Path config,
      String command,
      Collection<String> multiValued,
      Supplier<T> fresh,
      Body<T> body)
      throws Exception {
    PrintWriter out = spec.commandLine().getOut();
    PrintWriter err = spec.commandLine().getErr();
    T effective = self;
    if (config != null) {
      effective = reparse(spec, config, command, multiValued, fresh, err);
      if (effective == null) return 2;
    }
    return body.run(effective, out, err);
  }

  /**
   * The config file's settings followed by the original arguments ({@link #args}) parsed into a
   * fresh command from {@code fresh}; null (after printing why to {@code err}) when the file is
   * unreadable or names an unknown flag or a bad value. The fresh command's {@code --config} is
   * left unset: neither the file nor the arguments passed on can give it.
   */
  public static <T> T reparse(
      CommandSpec spec,
      Path file,
      String command,
      Collection<String> multiValued,
      Supplier<T> fresh,
      PrintWriter err) {
    String[] args = args(spec, file, command, multiValued, err);
    if (args == null) return null;
    T parsed = fresh.get();
    CommandLine cl = new CommandLine(parsed);
    cl.setOverwrittenOptionsAllowed(true);
    try {
      cl.parseArgs(args);
    } catch (CommandLine.ParameterException e) {
      err.println(command + ": --config " + file + ": " + e.getMessage());
      return null;
    }
    return parsed;
  }

  /**
   * The arguments of {@code file} then of the parsed command line of {@code spec} (its {@code
   * --config} left out), or null after printing why to {@code err} (an unreadable file, an unknown
   * key). A key in {@code multiValued} may hold several values separated by whitespace. A key
   * {@code FLAG.NAME}, for a flag that may be repeated, is the argument {@code --FLAG=NAME=value}
   * ({@code chat-template.qwen=/etc/tool.jinja} is {@code --chat-template qwen=/etc/tool.jinja}).
   */
  public static String[] args(
      CommandSpec spec,
      Path file,
      String command,
      Collection<String> multiValued,
      PrintWriter err) {
    Properties props = new Properties();
    try (Reader r = Files.newBufferedReader(file, StandardCharsets.UTF_8)) {
      props.load(r);
    } catch (IOException e) {
      err.println(command + ": cannot read --config " + file + ": " + e);
      return null;
    }
    List<String> args = new ArrayList<>();
    for (String key : new TreeSet<>(props.stringPropertyNames())) {
      OptionSpec o = spec.findOption("--" + key);
      String keyed = null; // FLAG.NAME=value: --FLAG NAME=value, for flags that repeat
      int dot = key.indexOf('.');
      if (o == null && dot > 0 && dot < key.length() - 1) {
        OptionSpec k = spec.findOption("--" + key.substring(0, dot));
        if (k != null && k.isMultiValue()) {
          o = k;
          keyed = key.substring(dot + 1);
        }
      }
      if (o == null || key.equals("config") || o.usageHelp() || o.versionHelp()) {
        err.println(
            command
                + ": --config "
                + file
                + ": unknown key '"
                + key
                + "'; keys are the long flag names without dashes, e.g. port=8091");
        return null;
      }
      String v = props.getProperty(key).trim();
      if (keyed != null) {
        args.add(o.longestName() + "=" + keyed + "=" + v);
      } else if (multiValued.contains(key)) {
        for (String part : v.split("\\s+")) {
          if (!part.isEmpty()) args.add("--" + key + "=" + part);
        }
      } else {
        args.add("--" + key + "=" + v);
      }
    }
    // then the command line's own flags (not the parent's arguments), so that they win
    for (OptionSpec o : spec.commandLine().getParseResult().matchedOptions()) {
      if (o.longestName().equals("--config")) continue;
      List<String> values = o.originalStringValues();
      if (values.isEmpty()) {
        args.add(o.longestName());
      } else {
        for (String v : values) args.add(o.longestName() + "=" + v);
      }
    }
    return args.toArray(new String[0]);
  }
}
