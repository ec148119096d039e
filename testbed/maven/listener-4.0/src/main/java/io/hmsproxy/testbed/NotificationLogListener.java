package io.hmsproxy.testbed;

import java.util.Collections;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hive.metastore.TransactionalMetaStoreEventListener;
import org.apache.hadoop.hive.metastore.api.Database;
import org.apache.hadoop.hive.metastore.api.Function;
import org.apache.hadoop.hive.metastore.api.MetaException;
import org.apache.hadoop.hive.metastore.api.NotificationEvent;
import org.apache.hadoop.hive.metastore.api.Table;
import org.apache.hadoop.hive.metastore.events.AddPartitionEvent;
import org.apache.hadoop.hive.metastore.events.AlterDatabaseEvent;
import org.apache.hadoop.hive.metastore.events.AlterPartitionEvent;
import org.apache.hadoop.hive.metastore.events.AlterTableEvent;
import org.apache.hadoop.hive.metastore.events.CreateDatabaseEvent;
import org.apache.hadoop.hive.metastore.events.CreateFunctionEvent;
import org.apache.hadoop.hive.metastore.events.CreateTableEvent;
import org.apache.hadoop.hive.metastore.events.DropDatabaseEvent;
import org.apache.hadoop.hive.metastore.events.DropFunctionEvent;
import org.apache.hadoop.hive.metastore.events.DropPartitionEvent;
import org.apache.hadoop.hive.metastore.events.DropTableEvent;
import org.apache.hadoop.hive.metastore.events.ListenerEvent;
import org.apache.hadoop.hive.metastore.messaging.EventMessage;
import org.apache.hadoop.hive.metastore.messaging.EventMessage.EventType;
import org.apache.hadoop.hive.metastore.messaging.MessageBuilder;
import org.apache.hadoop.hive.metastore.messaging.MessageEncoder;
import org.apache.hadoop.hive.metastore.messaging.MessageFactory;

/**
 * Writes the metastore's notification log (NOTIFICATION_LOG) for the
 * object events a cache must see: databases, tables, partitions and
 * functions. Configured as a transactional listener, so each event is
 * written in the transaction of the change it records, as
 * DbNotificationListener does. Messages are built by the server's own
 * MessageBuilder and encoded with its configured encoder
 * (metastore.event.message.factory; gzip(json-2.0) by default in 4.0), so
 * they read like DbNotificationListener's.
 *
 * It is a test-bed stand-in, not a replacement: transaction, constraint,
 * statistics and insert events are left out.
 */
public class NotificationLogListener extends TransactionalMetaStoreEventListener {
  private final MessageBuilder builder = MessageBuilder.getInstance();
  private final MessageEncoder encoder;

  public NotificationLogListener(Configuration conf) {
    super(conf);
    encoder = MessageFactory.getDefaultInstance(conf);
  }

  @Override
  public boolean doesAddEventsToNotificationLogTable() {
    return true;
  }

  private void log(ListenerEvent ev, EventType type, String cat, String db, String table, EventMessage msg)
      throws MetaException {
    if (!ev.getStatus()) {
      return; // the change failed: nothing to record
    }
    NotificationEvent ne = new NotificationEvent(0, (int) (System.currentTimeMillis() / 1000),
        type.toString(), encoder.getSerializer().serialize(msg));
    ne.setMessageFormat(encoder.getMessageFormat());
    ne.setCatName(cat);
    ne.setDbName(db);
    if (table != null) {
      ne.setTableName(table);
    }
    // The handler's RawStore is the one whose transaction is open.
    ev.getIHMSHandler().getMS().addNotificationEvent(ne);
  }

  private void logTable(ListenerEvent ev, EventType type, Table t, EventMessage msg) throws MetaException {
    log(ev, type, t.getCatName(), t.getDbName(), t.getTableName(), msg);
  }

  @Override
  public void onCreateDatabase(CreateDatabaseEvent ev) throws MetaException {
    Database d = ev.getDatabase();
    log(ev, EventType.CREATE_DATABASE, d.getCatalogName(), d.getName(), null, builder.buildCreateDatabaseMessage(d));
  }

  @Override
  public void onDropDatabase(DropDatabaseEvent ev) throws MetaException {
    Database d = ev.getDatabase();
    log(ev, EventType.DROP_DATABASE, d.getCatalogName(), d.getName(), null, builder.buildDropDatabaseMessage(d));
  }

  @Override
  public void onAlterDatabase(AlterDatabaseEvent ev) throws MetaException {
    Database before = ev.getOldDatabase(), after = ev.getNewDatabase();
    log(ev, EventType.ALTER_DATABASE, before.getCatalogName(), before.getName(), null,
        builder.buildAlterDatabaseMessage(before, after));
  }

  @Override
  public void onCreateTable(CreateTableEvent ev) throws MetaException {
    Table t = ev.getTable();
    logTable(ev, EventType.CREATE_TABLE, t, builder.buildCreateTableMessage(t, Collections.emptyIterator()));
  }

  @Override
  public void onDropTable(DropTableEvent ev) throws MetaException {
    Table t = ev.getTable();
    logTable(ev, EventType.DROP_TABLE, t, builder.buildDropTableMessage(t));
  }

  @Override
  public void onAlterTable(AlterTableEvent ev) throws MetaException {
    // Named after the old table, as DbNotificationListener does: a
    // rename's new name is in the message.
    Table before = ev.getOldTable(), after = ev.getNewTable();
    logTable(ev, EventType.ALTER_TABLE, before,
        builder.buildAlterTableMessage(before, after, ev.getIsTruncateOp(), ev.getWriteId()));
  }

  @Override
  public void onAddPartition(AddPartitionEvent ev) throws MetaException {
    Table t = ev.getTable();
    logTable(ev, EventType.ADD_PARTITION, t,
        builder.buildAddPartitionMessage(t, ev.getPartitionIterator(), Collections.emptyIterator()));
  }

  @Override
  public void onDropPartition(DropPartitionEvent ev) throws MetaException {
    Table t = ev.getTable();
    logTable(ev, EventType.DROP_PARTITION, t, builder.buildDropPartitionMessage(t, ev.getPartitionIterator()));
  }

  @Override
  public void onAlterPartition(AlterPartitionEvent ev) throws MetaException {
    Table t = ev.getTable();
    logTable(ev, EventType.ALTER_PARTITION, t, builder.buildAlterPartitionMessage(t, ev.getOldPartition(),
        ev.getNewPartition(), ev.getIsTruncateOp(), ev.getWriteId()));
  }

  @Override
  public void onCreateFunction(CreateFunctionEvent ev) throws MetaException {
    Function f = ev.getFunction();
    log(ev, EventType.CREATE_FUNCTION, f.getCatName(), f.getDbName(), null, builder.buildCreateFunctionMessage(f));
  }

  @Override
  public void onDropFunction(DropFunctionEvent ev) throws MetaException {
    Function f = ev.getFunction();
    log(ev, EventType.DROP_FUNCTION, f.getCatName(), f.getDbName(), null, builder.buildDropFunctionMessage(f));
  }
}
