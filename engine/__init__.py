from engine.util.deferred import defer_all

defer_all()  # before anything imports the Docker SDK (engine/util/deferred.py says why)
