// A Curator LeaderLatch participant: the `curator` baseline of `elect compare`
// and the other side of elect's interop tests.
//
// Usage: java LatchDriver <connect string> <latch path> <id> [<session ms> [session]]
// Prints "SEES <id>" whenever the leader it sees changes, "LEADER" when it
// leads and "NOT_LEADER" when it stops. The session timeout defaults to
// 2000 ms; "session" selects SessionConnectionStateErrorPolicy (leadership
// is kept through SUSPENDED until LOST) instead of Curator's default
// (given up on SUSPENDED). SIGTERM closes the latch (deleting its znode)
// and the client.
// LATCH_DIGEST=user:password authenticates with ZooKeeper's digest scheme.

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.framework.state.SessionConnectionStateErrorPolicy;
import org.apache.curator.retry.RetryOneTime;

public class LatchDriver {
    public static void main(String[] args) throws Exception {
        String connect = args[0], path = args[1], id = args[2];
        int sessionMs = args.length > 3 ? Integer.parseInt(args[3]) : 2000;
        CuratorFrameworkFactory.Builder builder = CuratorFrameworkFactory.builder()
                .connectString(connect)
                .sessionTimeoutMs(sessionMs)
                .connectionTimeoutMs(2000)
                .retryPolicy(new RetryOneTime(100));
        if (args.length > 4 && args[4].equals("session")) {
            builder = builder.connectionStateErrorPolicy(new SessionConnectionStateErrorPolicy());
        }
        String digest = System.getenv("LATCH_DIGEST");
        if (digest != null && !digest.isEmpty()) {
            builder = builder.authorization("digest", digest.getBytes("UTF-8"));
        }
        CuratorFramework client = builder.build();
        client.start();
        LeaderLatch latch = new LeaderLatch(client, path, id);
        latch.addListener(new LeaderLatchListener() {
            public void isLeader() { say("LEADER"); }
            public void notLeader() { say("NOT_LEADER"); }
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                latch.close();
            } catch (Exception e) {
                say("CLOSE_FAILED " + e);
            }
            client.close();
        }));
        latch.start();
        String seen = "";
        while (true) {
            try {
                String leader = latch.getLeader().getId();
                if (!leader.equals(seen)) {
                    seen = leader;
                    say("SEES " + leader);
                }
            } catch (Exception e) {
                // No participant yet, or a transient connection problem.
            }
            Thread.sleep(20);
        }
    }

    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }
}
