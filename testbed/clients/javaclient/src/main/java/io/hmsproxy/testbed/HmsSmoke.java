package io.hmsproxy.testbed;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hive.metastore.HiveMetaStoreClient;
import org.apache.hadoop.hive.metastore.IMetaStoreClient;
import org.apache.hadoop.hive.metastore.api.Database;
import org.apache.hadoop.hive.metastore.api.FieldSchema;
import org.apache.hadoop.hive.metastore.api.NoSuchObjectException;
import org.apache.hadoop.hive.metastore.api.Partition;
import org.apache.hadoop.hive.metastore.api.SerDeInfo;
import org.apache.hadoop.hive.metastore.api.StorageDescriptor;
import org.apache.hadoop.hive.metastore.api.Table;
import org.apache.hadoop.hive.metastore.conf.MetastoreConf;
import org.apache.hadoop.security.UserGroupInformation;

/**
 * Drives the stock HiveMetaStoreClient (3.1 or 4.0, whichever is on the
 * classpath) through a create / read / alter / drop cycle and checks each
 * answer.
 *
 * <pre>java io.hmsproxy.testbed.HmsSmoke thrift://127.0.0.1:9083 WORKDIR [DB]</pre>
 *
 * <p>With -Dhmstb.principal=P -Dhmstb.keytab=K it first logs in to Kerberos
 * from the keytab (without -Dhmstb.keytab: from the ticket cache KRB5CCNAME) (the metastore's SASL settings come from system
 * properties too: -Dmetastore.sasl.enabled=true
 * -Dmetastore.kerberos.principal=SERVICE/HOST@REALM).
 *
 * Prints one line starting with "java_client OK" and exits 0, or prints
 * "java_client FAIL ..." and exits 1.
 */
public final class HmsSmoke {
  private static int steps;
  private static String step = "connect";

  private HmsSmoke() {}

  private static void check(boolean ok, String what) {
    if (!ok) {
      throw new IllegalStateException("check failed: " + what);
    }
  }

  private static void at(String name) {
    step = name;
    steps++;
  }

  public static void main(String[] args) {
    if (args.length < 2) {
      System.err.println("usage: HmsSmoke thrift://host:port WORKDIR [DB]");
      System.exit(2);
    }
    String uri = args[0];
    String work = args[1];
    String db = args.length > 2 ? args[2] : "hmstb_java";
    long t0 = System.nanoTime();
    Configuration conf = MetastoreConf.newMetastoreConf();
    MetastoreConf.setVar(conf, MetastoreConf.ConfVars.THRIFT_URIS, uri);
    MetastoreConf.setBoolVar(conf, MetastoreConf.ConfVars.EXECUTE_SET_UGI, true);
    MetastoreConf.setLongVar(conf, MetastoreConf.ConfVars.THRIFT_CONNECTION_RETRIES, 1);
    String version = HiveMetaStoreClient.class.getPackage().getImplementationVersion();
    IMetaStoreClient c = null;
    try {
      String principal = System.getProperty("hmstb.principal");
      if (principal != null) {
        at("kerberos login");
        Configuration hc = new Configuration();
        hc.set("hadoop.security.authentication", "kerberos");
        UserGroupInformation.setConfiguration(hc);
        String keytab = System.getProperty("hmstb.keytab");
        if (keytab != null) {
          UserGroupInformation.loginUserFromKeytab(principal, keytab);
        } else {
          // from the ticket cache KRB5CCNAME names, as after kinit
          UserGroupInformation.getLoginUser();
        }
        step = "connect";
      }
      c = new HiveMetaStoreClient(conf);
      run(c, db, work);
    } catch (Throwable e) {
      String msg = String.valueOf(e.getMessage()).split("\n")[0];
      System.out.println("java_client FAIL uri=" + uri + " client=" + version + " step=" + steps
          + " '" + step + "': " + e.getClass().getSimpleName() + ": " + msg);
      if (System.getenv("HMSTB_TRACE") != null) {
        e.printStackTrace();
      }
      System.exit(1);
    } finally {
      if (c != null) {
        c.close();
      }
    }
    System.out.printf("java_client OK uri=%s client=%s steps=%d secs=%.1f%n", uri, version,
        steps, (System.nanoTime() - t0) / 1e9);
    System.exit(0);
  }

  private static void run(IMetaStoreClient c, String db, String work) throws Exception {
    String tname = "clicks";
    at("getDatabases(pattern)");
    if (c.getDatabases(db).contains(db)) {
      at("dropDatabase(leftover)");
      c.dropDatabase(db, true, true, true);
    }

    at("createDatabase");
    Map<String, String> dbParams = new HashMap<>();
    dbParams.put("k", "v");
    c.createDatabase(new Database(db, "hmsproxy test bed", "file://" + work + "/" + db + ".db",
        dbParams));
    at("getDatabase");
    Database d = c.getDatabase(db);
    check(db.equals(d.getName()) && "v".equals(d.getParameters().get("k")), "getDatabase " + d);
    at("getAllDatabases");
    check(c.getAllDatabases().contains(db), "getAllDatabases");

    at("createTable");
    String loc = "file://" + work + "/" + db + ".db/" + tname;
    c.createTable(newTable(db, tname, loc));
    at("getTable");
    Table t = c.getTable(db, tname);
    check(t.getPartitionKeys().stream().map(FieldSchema::getName).collect(Collectors.toList())
        .equals(Arrays.asList("dt", "region")), "partition keys " + t.getPartitionKeys());
    at("getTables(pattern)");
    check(c.getTables(db, "cl*").equals(List.of(tname)), "getTables");
    at("getTableObjectsByName");
    check(c.getTableObjectsByName(db, List.of(tname)).size() == 1, "getTableObjectsByName");

    at("add_partitions");
    String[][] specs = {{"2024-01-01", "eu"}, {"2024-01-01", "us"}, {"2024-01-02", "eu"},
        {"2024-01-03", "ap"}};
    List<Partition> parts = new ArrayList<>();
    for (String[] s : specs) {
      parts.add(newPartition(t, Arrays.asList(s), loc + "/dt=" + s[0] + "/region=" + s[1]));
    }
    int added = c.add_partitions(parts);
    check(added == specs.length, "add_partitions returned " + added);

    at("listPartitionNames");
    List<String> names = new ArrayList<>(c.listPartitionNames(db, tname, (short) -1));
    names.sort(null);
    check(names.equals(List.of("dt=2024-01-01/region=eu", "dt=2024-01-01/region=us",
        "dt=2024-01-02/region=eu", "dt=2024-01-03/region=ap")), "listPartitionNames " + names);
    at("listPartitionNames(partial spec)");
    List<String> ps = c.listPartitionNames(db, tname, List.of("2024-01-01"), (short) -1);
    check(ps.size() == 2, "listPartitionNames(ps) " + ps);

    at("getPartitionsByNames");
    List<Partition> byNames = c.getPartitionsByNames(db, tname,
        List.of("dt=2024-01-01/region=us", "dt=2024-01-03/region=ap"));
    check(byNames.size() == 2, "getPartitionsByNames " + byNames.size());

    at("getPartition");
    Partition p = c.getPartition(db, tname, List.of("2024-01-02", "eu"));
    check(p.getValues().equals(List.of("2024-01-02", "eu")), "getPartition");

    at("listPartitionsByFilter(region)");
    List<Partition> eu = c.listPartitionsByFilter(db, tname, "region = \"eu\"", (short) -1);
    check(eu.size() == 2, "filter region=eu -> " + eu.size());
    at("listPartitionsByFilter(dt range and)");
    List<Partition> f2 = c.listPartitionsByFilter(db, tname,
        "dt >= \"2024-01-02\" and region <> \"eu\"", (short) -1);
    check(f2.size() == 1 && f2.get(0).getValues().get(1).equals("ap"), "filter and -> " + f2.size());

    at("alter_table");
    Table t2 = c.getTable(db, tname);
    t2.getSd().addToCols(new FieldSchema("extra", "string", "added"));
    t2.putToParameters("hmstb.altered", "yes");
    c.alter_table(db, tname, t2);
    Table t3 = c.getTable(db, tname);
    check("yes".equals(t3.getParameters().get("hmstb.altered")), "alter_table param");
    check(t3.getSd().getCols().size() == 4, "alter_table column");

    at("alter_table(rename)");
    Table t4 = c.getTable(db, tname);
    t4.setTableName(tname + "_renamed");
    c.alter_table(db, tname, t4);
    check(c.getTables(db, "*").equals(List.of(tname + "_renamed")), "rename");
    tname = tname + "_renamed";
    check(c.listPartitionNames(db, tname, (short) -1).size() == 4, "partitions follow rename");

    at("dropPartition");
    check(c.dropPartition(db, tname, List.of("2024-01-03", "ap"), false), "dropPartition");
    try {
      c.getPartition(db, tname, List.of("2024-01-03", "ap"));
      check(false, "dropped partition still readable");
    } catch (NoSuchObjectException expected) {
      // good
    }

    at("getCurrentNotificationEventId");
    long nid = c.getCurrentNotificationEventId().getEventId();
    System.err.println("notification event id: " + nid);

    if (System.getenv("HMSTB_KEEP") == null) {
      at("dropTable");
      c.dropTable(db, tname);
      at("dropDatabase");
      c.dropDatabase(db);
      check(!c.getAllDatabases().contains(db), "database still there");
    }
  }

  private static Table newTable(String db, String name, String loc) {
    List<FieldSchema> cols = List.of(new FieldSchema("id", "bigint", ""),
        new FieldSchema("url", "string", ""), new FieldSchema("ms", "int", ""));
    SerDeInfo serde = new SerDeInfo(null, "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe",
        new HashMap<>(Map.of("serialization.format", ",")));
    StorageDescriptor sd = new StorageDescriptor(new ArrayList<>(cols), loc,
        "org.apache.hadoop.mapred.TextInputFormat",
        "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat", false, -1, serde,
        new ArrayList<>(), new ArrayList<>(), new HashMap<>());
    Table t = new Table();
    t.setDbName(db);
    t.setTableName(name);
    t.setOwner(System.getProperty("user.name"));
    t.setCreateTime((int) (System.currentTimeMillis() / 1000));
    t.setSd(sd);
    t.setPartitionKeys(new ArrayList<>(List.of(new FieldSchema("dt", "string", ""),
        new FieldSchema("region", "string", ""))));
    t.setTableType("EXTERNAL_TABLE");
    t.setParameters(new HashMap<>(Map.of("EXTERNAL", "TRUE")));
    return t;
  }

  private static Partition newPartition(Table t, List<String> values, String loc) {
    StorageDescriptor sd = new StorageDescriptor(t.getSd());
    sd.setLocation(loc);
    Partition p = new Partition();
    p.setDbName(t.getDbName());
    p.setTableName(t.getTableName());
    p.setValues(new ArrayList<>(values));
    p.setSd(sd);
    p.setParameters(new HashMap<>());
    p.setCreateTime((int) (System.currentTimeMillis() / 1000));
    return p;
  }
}
