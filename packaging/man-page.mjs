// The man page boinc-gahp(1), made from the text of `boinc-gahp --help` so the two cannot
// drift apart: the usage line becomes SYNOPSIS, the first paragraph NAME, the paragraphs
// before the first "Heading:" line DESCRIPTION, each "Heading:" block of "  term  text"
// entries (commander's layout of Options:, Commands:, Examples:) a section of tagged
// paragraphs, and a later paragraph "Heading: text" a section of its own. Each command's
// own help (`boinc-gahp help <command>`) follows the commands, in COMMAND OPTIONS. Anything in another shape is
// kept as a paragraph of text, so a change of the help never loses words here.

/** Text made safe for roff: backslashes, and a leading dot or quote (a roff request). */
function roff(text) {
  return text.replace(/\\/g, '\\e').replace(/^([.'])/, '\\&$1');
}

/** An option or command name: hyphens as roff's minus, so they can be copied from the page. */
function term(text) {
  return roff(text).replace(/-/g, '\\-');
}

/** Running text: an option named in it (--force, -V) gets roff's minus as well. */
function prose(text) {
  return roff(text).replace(/(^|[\s[(])(--?[A-Za-z][\w-]*)/g, (_, before, option) => before + term(option));
}

/** Splits lines into blocks: paragraphs (joined, wrapping undone) and "Heading:" sections of entries. */
function blocks(lines) {
  const out = [];
  let paragraph = null;
  let section = null;
  for (const line of lines) {
    const heading = /^([A-Z][A-Za-z ]*):$/.exec(line);
    const entry = /^ {2}(\S.*?) {2,}(\S.*)$/.exec(line);
    if (heading) {
      section = { heading: heading[1], entries: [] };
      out.push(section);
      paragraph = null;
    } else if (section && entry) {
      section.entries.push({ term: entry[1], text: entry[2] });
    } else if (section && /^ {4,}\S/.test(line) && section.entries.length > 0) {
      section.entries[section.entries.length - 1].text += ` ${line.trim()}`;
    } else if (line.trim() === '') {
      paragraph = null;
    } else {
      section = null;
      if (paragraph) paragraph.text += ` ${line.trim()}`;
      else out.push((paragraph = { text: line.trim() }));
    }
  }
  return out;
}

/** The commands the help lists (its "Commands:" section), for their own help texts. */
export function commandNames(helpText) {
  const section = blocks(helpText.replace(/\r/g, '').split('\n')).find((b) => b.heading === 'Commands');
  return (section?.entries ?? []).map((e) => e.term.split(' ')[0]).filter((name) => name !== 'help');
}

/** One command's `help <command>` as a subsection: its usage, what it does, its arguments and options. */
function commandSection(helpText) {
  const lines = helpText.replace(/\r/g, '').split('\n');
  const usage = /^Usage: (.*)$/.exec(lines[0] ?? '');
  if (!usage) throw new Error(`a command's help does not start with "Usage: ": ${JSON.stringify(lines[0])}`);
  const out = [`.SS ${term(usage[1])}`];
  for (const block of blocks(lines.slice(1))) {
    if (!('entries' in block)) {
      out.push('.PP', prose(block.text));
      continue;
    }
    for (const e of block.entries) if (e.term !== '-h, --help') out.push('.TP', `.B ${term(e.term)}`, prose(e.text));
  }
  return out;
}

/**
 * helpText: the output of `boinc-gahp --help`; where: the installed paths the page names;
 * commandHelps: each command's `boinc-gahp help <command>`, by name (commandNames), shown
 * after the list of commands. Returns the page in man(7) markup.
 */
export function helpToMan(helpText, where, commandHelps = {}) {
  const lines = helpText.replace(/\r/g, '').split('\n');
  const usage = /^Usage: (\S+)\s*(.*)$/.exec(lines[0] ?? '');
  if (!usage) throw new Error(`the help does not start with "Usage: ": ${JSON.stringify(lines[0])}`);
  const parsed = blocks(lines.slice(1));
  const first = parsed[0] && 'text' in parsed[0] ? parsed.shift().text : 'a GAHP server for BOINC';
  const out = [
    `.TH BOINC-GAHP 1 "" "boinc-gahp ${roff(where.version)}" "User Commands"`,
    '.\\" Made from `boinc-gahp --help` by packaging/man-page.mjs; edit the help, not this page.',
    '.SH NAME',
    `boinc-gahp \\- ${roff(first.replace(/\.$/, ''))}`,
    '.SH SYNOPSIS',
    `.B ${term(usage[1])}`,
    term(usage[2]),
  ];
  let heading = 'DESCRIPTION';
  out.push(`.SH ${heading}`);
  for (const block of parsed) {
    if ('entries' in block) {
      out.push(`.SH ${roff(block.heading.toUpperCase())}`);
      heading = block.heading;
      for (const e of block.entries) out.push('.TP', `.B ${term(e.term)}`, prose(e.text));
      if (block.heading === 'Commands' && Object.keys(commandHelps).length > 0) {
        out.push('.SH COMMAND OPTIONS');
        for (const text of Object.values(commandHelps)) out.push(...commandSection(text));
      }
      continue;
    }
    const titled = heading !== 'DESCRIPTION' ? /^([A-Z][A-Za-z ]{0,30}): (.*)$/.exec(block.text) : null;
    if (titled) {
      heading = titled[1];
      out.push(`.SH ${roff(heading.toUpperCase())}`, prose(titled[2]));
    } else {
      if (heading !== 'DESCRIPTION' && heading !== 'NOTES') out.push(`.SH ${(heading = 'NOTES')}`);
      out.push('.PP', prose(block.text));
    }
  }
  out.push(
    '.SH FILES',
    '.TP', `.I ${roff(where.libDir)}`, 'the program, with the Node.js modules it runs on',
    '.TP', `.I ${roff(where.blahpDir)}/boinc_*.sh`, 'BOINC as a BLAHP batch system, for blahpd of HTCondor\'s own packages (an HTCondor under a prefix: boinc-gahp blahp install); their settings are the boinc_* lines of blah.config (boinc-gahp blahp where names it)',
    '.SH SEE ALSO',
    `${roff(where.docDir)}/README.md and ${roff(where.docDir)}/docs/ (docs/blahp.md: the BLAHP scripts).`,
  );
  return `${out.join('\n')}\n`;
}
