"""Runs a command on a pseudo-terminal (120x40) and relays bytes: our stdin -> the terminal,
the terminal's output -> our stdout. Exits with the command's exit code. Used by the CLI
tests to drive interactive mode as a person at a terminal would (no native node modules)."""
import fcntl, os, pty, select, struct, sys, termios

pid, fd = pty.fork()
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:])
fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack('HHHH', 40, 120, 0, 0))
stdin_open = True
while True:
    fds = [fd] + ([0] if stdin_open else [])
    r, _, _ = select.select(fds, [], [], 0.1)
    if fd in r:
        try:
            data = os.read(fd, 65536)
        except OSError:
            break
        if not data:
            break
        os.write(1, data)
    if stdin_open and 0 in r:
        data = os.read(0, 65536)
        if not data:
            stdin_open = False
        else:
            os.write(fd, data)
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
